#include "drivers/rbd/rbd_params.h"

#include <string_view>

#include "drivers/params.h"

namespace blkmq::rbd {
namespace {

using drvparam::ParamValue;

constexpr const char* kDriver = "rbd";
constexpr unsigned kMaxQueues = 1024;
constexpr unsigned kMaxSectorsLimit = 65535;

// A name that goes to librados as it is: not empty.
Status set_name(std::string* field, const ParamValue& v, const char* accepted) {
  if (v.value.empty()) return v.error(accepted);
  *field = std::string(v.value);
  return Status::OK();
}

const drvparam::ParamDef<RbdParams> kParams[] = {
    {"rbdname", "", "the RBD image to serve (required)",
     [](RbdParams& p, const ParamValue& v) { return set_name(&p.rbdname, v, "an image name"); }},
    {"pool", "rbd", "the pool that holds the image",
     [](RbdParams& p, const ParamValue& v) { return set_name(&p.pool, v, "a pool name"); }},
    {"clustername", "ceph", "the cluster's name (its conf is /etc/ceph/NAME.conf unless 'conf' is given)",
     [](RbdParams& p, const ParamValue& v) { return set_name(&p.clustername, v, "a cluster name"); }},
    {"clientname", "admin", "the Ceph user to connect as ('client.' is prefixed unless it has a '.')",
     [](RbdParams& p, const ParamValue& v) { return set_name(&p.clientname, v, "a user name"); }},
    {"conf", "", "path of a ceph.conf; empty = librados's search ($CEPH_CONF, /etc/ceph/NAME.conf, ...)",
     [](RbdParams& p, const ParamValue& v) {
       p.conf = std::string(v.value);
       return Status::OK();
     }},
    {"submit_queues", "1", "hw queues, each issuing to the one image handle",
     [](RbdParams& p, const ParamValue& v) { return v.to_int(1u, kMaxQueues, &p.submit_queues); }},
    {"hw_queue_depth", "128", "driver tags per hw queue (requests in flight to librbd); 128 as krbd",
     [](RbdParams& p, const ParamValue& v) { return v.to_int(1u, 4096u, &p.hw_queue_depth); }},
    {"max_sectors", "2560", "maximum request size in 512-byte sectors (at most the image's object set)",
     [](RbdParams& p, const ParamValue& v) { return v.to_int(1u, kMaxSectorsLimit, &p.max_sectors); }},
    {"osd_op_timeout", "30",
     "seconds before an operation the cluster does not answer fails with a timeout "
     "(rados_osd_op_timeout, rados_mon_op_timeout); 0 = wait forever, as krbd",
     [](RbdParams& p, const ParamValue& v) { return v.to_int(0u, 86400u, &p.osd_op_timeout); }},
    {"completion", "callback",
     "how completions reach blkmq: 'callback' (librbd's thread ends the request) or 'eventfd' "
     "(librbd signals an eventfd and the driver's own thread ends the requests)",
     [](RbdParams& p, const ParamValue& v) {
       size_t i = 0;
       if (Status st = v.to_choice({"callback", "eventfd"}, &i); !st) return st;
       p.eventfd_completion = i == 1;
       return Status::OK();
     }},
};

}  // namespace

Result<RbdParams> parse_rbd_params(const ParamMap& params) {
  RbdParams p;
  if (Status st = drvparam::parse_params(kDriver, kParams, params, &p); !st) return st;
  if (p.rbdname.empty()) return Status::invalid("rbd: parameter 'rbdname' is required (the image to serve)");
  return p;
}

std::vector<ParamInfo> rbd_param_infos() { return drvparam::param_infos(kParams); }

std::string rados_user(const RbdParams& p) {
  return p.clientname.find('.') == std::string::npos ? "client." + p.clientname : p.clientname;
}

}  // namespace blkmq::rbd

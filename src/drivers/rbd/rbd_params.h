// The rbd driver's parameters, parsed and validated from create_device()'s
// string map. The cluster and image names are fio's rbd engine's.
#pragma once

#include <string>
#include <vector>

#include "blkmq/device.h"
#include "blkmq/status.h"

namespace blkmq::rbd {

struct RbdParams {
  std::string clustername = "ceph";  // cluster name: /etc/ceph/<name>.conf by default
  std::string pool = "rbd";
  std::string rbdname;               // required: the image
  std::string clientname = "admin";  // the Ceph user, "client." prefixed unless it has a '.'
  std::string conf;                  // a ceph.conf path; "" = librados's search ($CEPH_CONF, /etc/ceph, ...)
  unsigned submit_queues = 1;        // hw queues, all on the one image handle
  unsigned hw_queue_depth = 128;     // driver tags per hw queue (krbd's queue_depth default)
  unsigned max_sectors = 2560;       // soft request size limit in 512 B sectors (the kernel's default cap)
  // Seconds before an OSD or monitor operation fails with -ETIMEDOUT
  // (librados's rados_osd_op_timeout and rados_mon_op_timeout); 0 = never,
  // krbd's default. blkmq's default is the block layer's 30 s request
  // timeout, so that a cluster that goes away fails I/O instead of holding
  // it (and the device's teardown) forever.
  unsigned osd_op_timeout = 30;
  // How completions reach the core: librbd's callback on its own thread
  // (false), or an eventfd librbd signals and the driver's completion
  // thread drains with rbd_poll_io_events (true). See rbd_ops.cc.
  bool eventfd_completion = false;
};

// Parses and validates `params`. Unknown names, malformed values and values
// out of range are refused with a message naming the parameter; entries
// named "attr:..." belong to the core and are skipped. A missing rbdname is
// an error.
Result<RbdParams> parse_rbd_params(const ParamMap& params);

// One ParamInfo per parameter, in a stable order.
std::vector<ParamInfo> rbd_param_infos();

// The librados user id: clientname as given when it names a type
// ("client.foo"), else "client." + clientname, as fio's rbd engine.
std::string rados_user(const RbdParams& p);

}  // namespace blkmq::rbd

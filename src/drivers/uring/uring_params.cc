#include "drivers/uring/uring_params.h"

#include <string_view>

#include "drivers/params.h"

namespace blkmq::uring {
namespace {

using drvparam::ParamValue;

constexpr const char* kDriver = "uring";
// Bytes when bare, as fio's size: "size=1024" is refused (under 1 MiB)
// rather than made a 1 KiB file (issue 27).
constexpr base::SizeRule kSizeRule = drvparam::byte_capacity(/*zero_ok=*/true);

constexpr unsigned kMaxQueues = 1024;
constexpr unsigned kMaxSectorsLimit = 65535;

const drvparam::ParamDef<UringParams> kParams[] = {
    {"filename", "", "file or block device to serve (required); a missing regular file is created with 'size'",
     [](UringParams& p, const ParamValue& v) {
       if (v.value.empty()) return v.error("a path");
       p.filename = std::string(v.value);
       return Status::OK();
     }},
    {"size", "0",
     "capacity; 0 = the file's size. A missing file is created this big, a smaller file is extended; "
     "a larger file is used up to this size only",
     [](UringParams& p, const ParamValue& v) { return v.to_size(kSizeRule, &p.size); }, &kSizeRule},
    {"direct", "0", "open with O_DIRECT (bypass the page cache)",
     [](UringParams& p, const ParamValue& v) { return v.to_bool(&p.direct); }},
    {"bs", "512", "logical block size in bytes: 512, 1024, 2048 or 4096",
     [](UringParams& p, const ParamValue& v) {
       return v.to_power_of_two(512u, 4096u, &p.bs);
     }},
    {"submit_queues", "1", "default-type hw queues, one io_uring and reaper thread each",
     [](UringParams& p, const ParamValue& v) {
       return v.to_int(1u, kMaxQueues, &p.submit_queues);
     }},
    {"poll_queues", "0", "poll-type hw queues: completions are reaped by Queue::poll, no reaper thread",
     [](UringParams& p, const ParamValue& v) {
       return v.to_int(0u, kMaxQueues, &p.poll_queues);
     }},
    {"hw_queue_depth", "128", "driver tags per hw queue (= ring entries); 128 as the kernel's loop driver",
     [](UringParams& p, const ParamValue& v) {
       return v.to_int(1u, 4096u, &p.hw_queue_depth);
     }},
    {"sqpoll", "0", "IORING_SETUP_SQPOLL: a kernel thread per ring picks up submissions",
     [](UringParams& p, const ParamValue& v) { return v.to_bool(&p.sqpoll); }},
    {"fixed_files", "1", "register the file with each ring (IOSQE_FIXED_FILE)",
     [](UringParams& p, const ParamValue& v) {
       return v.to_bool(&p.fixed_files);
     }},
    {"nonvectored", "1",
     "a read or write of one segment goes as IORING_OP_READ/WRITE, without an iovec for the kernel "
     "to import, as fio's io_uring engine does by default; 0 = always READV/WRITEV",
     [](UringParams& p, const ParamValue& v) { return v.to_bool(&p.nonvectored); }},
    {"max_sectors", "2560", "maximum request size in 512-byte sectors (at least one block)",
     [](UringParams& p, const ParamValue& v) {
       return v.to_int(1u, kMaxSectorsLimit, &p.max_sectors);
     }},
    {"force_async", "0",
     "issue every Nth request with IOSQE_ASYNC, straight to io_uring's worker threads, as fio's "
     "io_uring engine option of that name; 0 = never",
     [](UringParams& p, const ParamValue& v) {
       return v.to_int(0u, 1u << 20, &p.force_async);
     }},
    {"waiter_reaps", "1",
     "a thread sleeping in Queue::wait sleeps in the ring and completes what arrives there, "
     "instead of the reaper thread completing it and waking the thread (kernel 6.7+: needs "
     "io_uring's futex wait); 0 = the reaper completes everything",
     [](UringParams& p, const ParamValue& v) { return v.to_bool(&p.waiter_reaps); }},
};

}  // namespace

Result<UringParams> parse_uring_params(const ParamMap& params) {
  UringParams p;
  if (Status st = drvparam::parse_params(kDriver, kParams, params, &p); !st) return st;
  if (p.filename.empty()) {
    return Status::invalid("uring: parameter 'filename' is required (a regular file or a block device)");
  }
  if (Status st = drvparam::fit_max_sectors(kDriver, p.bs, &p.max_sectors); !st) return st;
  return p;
}

std::vector<ParamInfo> uring_param_infos() { return drvparam::param_infos(kParams); }

}  // namespace blkmq::uring

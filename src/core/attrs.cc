// Queue attributes with the kernel's sysfs names, units and ranges. A bad
// path or value is refused with a message and changes nothing.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>

#include "base/parse.h"
#include "core/core.h"
#include "core/trace.h"
#include "qos/blkcg.h"
#include "qos/iocost.h"
#include "qos/iolatency.h"
#include "qos/wbt.h"

namespace blkmq {
namespace {

std::string trim(std::string_view v) {
  size_t a = 0, b = v.size();
  while (a < b && (v[a] == ' ' || v[a] == '\t')) a++;
  while (b > a && (v[b - 1] == ' ' || v[b - 1] == '\n' || v[b - 1] == '\t')) b--;
  return std::string(v.substr(a, b - a));
}

Status choice(std::string_view path, std::string_view v, std::initializer_list<const char*> opts, int* idx) {
  int i = 0;
  std::string list;
  for (const char* o : opts) {
    if (v == o) {
      *idx = i;
      return Status::OK();
    }
    list += (i ? ", " : "") + std::string(o);
    i++;
  }
  return base::invalid_value(path, v, "is not one of them", "one of " + list);
}

struct Attr {
  const char* name;
  std::string (*show)(const QueueImpl* q);
  Status (*store)(QueueImpl* q, std::string_view v);  // null: read-only
};

std::string u(uint64_t v) { return std::to_string(v); }

// What one append may carry: the device's native limit, or with the
// emulation what one write request takes; never past a zone.
uint32_t zone_append_max_sectors(const QueueImpl* q) {
  const QueueLimits& l = q->limits_;
  if (!l.zoned) return 0;
  const uint32_t max = l.max_zone_append_sectors ? l.max_zone_append_sectors : l.max_sectors;
  return std::min({max, l.max_sectors, l.chunk_sectors});
}

std::string show_stat(const QueueImpl* q) {
  DiskStat d = static_cast<const Queue*>(q)->disk_stat();
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "%8llu %8llu %8llu %8llu %8llu %8llu %8llu %8llu %8llu %8llu %8llu %8llu %8llu %8llu %8llu "
                "%8llu %8llu",
                (unsigned long long)d.read_ios, (unsigned long long)d.read_merges,
                (unsigned long long)d.read_sectors, (unsigned long long)d.read_ticks_ms,
                (unsigned long long)d.write_ios, (unsigned long long)d.write_merges,
                (unsigned long long)d.write_sectors, (unsigned long long)d.write_ticks_ms,
                (unsigned long long)d.in_flight, (unsigned long long)d.io_ticks_ms,
                (unsigned long long)d.time_in_queue_ms, (unsigned long long)d.discard_ios,
                (unsigned long long)d.discard_merges, (unsigned long long)d.discard_sectors,
                (unsigned long long)d.discard_ticks_ms, (unsigned long long)d.flush_ios,
                (unsigned long long)d.flush_ticks_ms);
  return buf;
}

std::string show_inflight(const QueueImpl* q) {
  uint64_t in[2];
  count_inflight(q, in);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%8llu %8llu", (unsigned long long)in[0], (unsigned long long)in[1]);
  return buf;
}

const Attr kAttrs[] = {
    {"queue/scheduler", [](const QueueImpl* q) { return elevator_list(q); },
     [](QueueImpl* q, std::string_view v) {
       std::shared_lock<std::shared_mutex> l(q->set_->update_lock_);
       Status st = elevator_switch(q, v);
       // bfq turns a default wbt off; leaving it turns it back on
       // (wbt_disable_default / wbt_enable_default in the kernel).
       if (st) wbt_elevator_changed(q);
       return st;
     }},
    {"queue/nr_requests", [](const QueueImpl* q) { return u(q->nr_requests_); },
     [](QueueImpl* q, std::string_view v) -> Status {
       auto n = base::parse_uint("queue/nr_requests", v, 0, 1u << 20);
       if (!n) return n.status();
       // Resizes scheduler tags, which an update of the hw queues rebuilds.
       std::shared_lock<std::shared_mutex> l(q->set_->update_lock_);
       return set_nr_requests(q, static_cast<unsigned>(*n));
     }},
    {"queue/async_depth", [](const QueueImpl* q) { return u(q->async_depth_); },
     [](QueueImpl* q, std::string_view v) -> Status {
       std::lock_guard<std::mutex> g(q->sysfs_lock_);
       auto n = base::parse_uint("queue/async_depth", v, 1, q->nr_requests_);
       if (!n) return n.status();
       q->async_depth_ = static_cast<unsigned>(*n);
       if (q->elevator_ && q->elevator_->type->ops.depth_updated) q->elevator_->type->ops.depth_updated(q);
       return Status::OK();
     }},
    {"queue/rq_affinity", [](const QueueImpl* q) { return u(q->tun_.rq_affinity.load()); },
     [](QueueImpl* q, std::string_view v) -> Status {
       auto n = base::parse_uint("queue/rq_affinity", v, 0, 2);
       if (!n) return n.status();
       q->tun_.rq_affinity.store(static_cast<unsigned>(*n));
       return Status::OK();
     }},
    {"queue/nomerges", [](const QueueImpl* q) { return u(q->tun_.nomerges.load()); },
     [](QueueImpl* q, std::string_view v) -> Status {
       auto n = base::parse_uint("queue/nomerges", v, 0, 2);
       if (!n) return n.status();
       q->tun_.nomerges.store(static_cast<unsigned>(*n));
       return Status::OK();
     }},
    {"queue/max_sectors_kb", [](const QueueImpl* q) { return u(q->limits_.max_sectors / 2); },
     [](QueueImpl* q, std::string_view v) -> Status {
       // queue_max_sectors_store refuses less than a page (page_kb).
       constexpr uint64_t kPageKb = 4;  // 1 << (PAGE_SHIFT - 10)
       const uint64_t lo = std::max<uint64_t>(kPageKb, q->limits_.logical_block_size / 1024);
       auto n = base::parse_uint("queue/max_sectors_kb", v, lo, q->limits_.max_hw_sectors / 2);
       if (!n) return n.status();
       if ((*n * 1024) % q->limits_.logical_block_size)
         return base::invalid_value("queue/max_sectors_kb", v, "is not a whole number of logical blocks",
                                    "a multiple of " + u(q->limits_.logical_block_size / 1024) + " (KiB)");
       // Limits are read on the submission path without a lock: change
       // them with the queue frozen.
       q->freeze_start();
       q->freeze_wait();
       q->limits_.max_sectors = static_cast<uint32_t>(*n * 2);
       q->unfreeze_impl();
       return Status::OK();
     }},
    {"queue/max_hw_sectors_kb", [](const QueueImpl* q) { return u(q->limits_.max_hw_sectors / 2); }, nullptr},
    {"queue/max_segments", [](const QueueImpl* q) { return u(q->limits_.max_segments); }, nullptr},
    {"queue/max_segment_size", [](const QueueImpl* q) { return u(q->limits_.max_segment_size); }, nullptr},
    {"queue/logical_block_size", [](const QueueImpl* q) { return u(q->limits_.logical_block_size); }, nullptr},
    {"queue/physical_block_size", [](const QueueImpl* q) { return u(q->limits_.physical_block_size); }, nullptr},
    {"queue/hw_sector_size", [](const QueueImpl* q) { return u(q->limits_.logical_block_size); }, nullptr},
    {"queue/rotational", [](const QueueImpl* q) { return u(q->limits_.rotational); }, nullptr},
    {"queue/write_cache", [](const QueueImpl* q) { return std::string(q->limits_.write_cache ? "write back" : "write through"); }, nullptr},
    {"queue/fua", [](const QueueImpl* q) { return u(q->limits_.fua); }, nullptr},
    {"queue/discard_max_bytes", [](const QueueImpl* q) { return u(uint64_t(q->limits_.max_discard_sectors) << 9); }, nullptr},
    {"queue/io_poll", [](const QueueImpl* q) { return u(q->limits_.poll); }, nullptr},
    {"queue/dma_alignment", [](const QueueImpl* q) { return u(q->limits_.dma_alignment); }, nullptr},
    // The zoned model (the kernel's queue/zoned and its companions); all
    // read-only, 0 where the device has no zones.
    {"queue/zoned", [](const QueueImpl* q) { return std::string(q->limits_.zoned ? "host-managed" : "none"); },
     nullptr},
    {"queue/nr_zones", [](const QueueImpl* q) { return u(q->nr_zones()); }, nullptr},
    {"queue/chunk_sectors", [](const QueueImpl* q) { return u(q->limits_.chunk_sectors); }, nullptr},
    {"queue/zone_append_max_bytes", [](const QueueImpl* q) { return u(uint64_t(zone_append_max_sectors(q)) << 9); },
     nullptr},
    {"queue/zone_write_granularity", [](const QueueImpl* q) { return u(q->limits_.zone_write_granularity); },
     nullptr},
    {"queue/max_open_zones", [](const QueueImpl* q) { return u(q->limits_.max_open_zones); }, nullptr},
    {"queue/max_active_zones", [](const QueueImpl* q) { return u(q->limits_.max_active_zones); }, nullptr},
    // debugfs block/<dev>/zone_wplugs: "zone_no flags ref wp_offset
    // bio_list_size" for each plug.
    {"zone_wplugs", [](const QueueImpl* q) { return q->zwp_ ? q->zwp_->show() : std::string(); }, nullptr},
    {"queue/io_timeout", [](const QueueImpl* q) { return u(q->tun_.io_timeout_ms.load()); },
     [](QueueImpl* q, std::string_view v) -> Status {
       auto n = base::parse_uint("queue/io_timeout", v, 1, 0x7fffffff);
       if (!n) return n.status();
       q->tun_.io_timeout_ms.store(static_cast<unsigned>(*n));
       return Status::OK();
     }},
    {"queue/iostats", [](const QueueImpl* q) { return u(q->tun_.iostats.load()); },
     [](QueueImpl* q, std::string_view v) -> Status {
       auto n = base::parse_uint("queue/iostats", v, 0, 1);
       if (!n) return n.status();
       q->tun_.iostats.store(*n != 0);
       return Status::OK();
     }},
    {"queue/sched_insert_run",
     [](const QueueImpl* q) {
       return std::string(q->tun_.sched_insert_run.load() == SchedInsertRun::sync ? "[sync] async" : "sync [async]");
     },
     [](QueueImpl* q, std::string_view v) -> Status {
       int i = 0;
       if (Status s = choice("queue/sched_insert_run", v, {"sync", "async"}, &i); !s) return s;
       q->tun_.sched_insert_run.store(i ? SchedInsertRun::async : SchedInsertRun::sync);
       return Status::OK();
     }},
    {"queue/submit_plug",
     [](const QueueImpl* q) { return std::string(q->tun_.submit_plug_implicit.load() ? "none [implicit]" : "[none] implicit"); },
     [](QueueImpl* q, std::string_view v) -> Status {
       int i = 0;
       if (Status s = choice("queue/submit_plug", v, {"none", "implicit"}, &i); !s) return s;
       q->tun_.submit_plug_implicit.store(i == 1);
       return Status::OK();
     }},
    {"queue/plug_direct_issue", [](const QueueImpl* q) { return u(q->tun_.plug_direct_issue.load()); },
     [](QueueImpl* q, std::string_view v) -> Status {
       auto n = base::parse_uint("queue/plug_direct_issue", v, 0, 1);
       if (!n) return n.status();
       q->tun_.plug_direct_issue.store(*n != 0);
       return Status::OK();
     }},
    {"queue/task_completion",
     [](const QueueImpl* q) {
       return std::string(q->tun_.task_completion.load() == TaskCompletion::local ? "[local] softirq" : "local [softirq]");
     },
     [](QueueImpl* q, std::string_view v) -> Status {
       int i = 0;
       if (Status s = choice("queue/task_completion", v, {"local", "softirq"}, &i); !s) return s;
       q->tun_.task_completion.store(i ? TaskCompletion::softirq : TaskCompletion::local);
       return Status::OK();
     }},
    // Writeback throttling's target (src/qos/wbt.h): -1 default, 0 off.
    {"queue/wbt_lat_usec", [](const QueueImpl* q) { return wbt_lat_show_locked(q); },
     [](QueueImpl* q, std::string_view v) { return wbt_lat_store(q, v); }},
    {"stat", show_stat, nullptr},
    {"inflight", show_inflight, nullptr},
    {"size", [](const QueueImpl* q) { return u(q->limits_.capacity_sectors); }, nullptr},
    // /sys/block/<dev>/trace/enable, and where the files go: the kernel
    // hands events to the blktrace tool through debugfs instead.
    {"trace/enable", [](const QueueImpl* q) { return u(tracer(q) != nullptr); },
     [](QueueImpl* q, std::string_view v) -> Status {
       auto n = base::parse_uint("trace/enable", v, 0, 1);
       if (!n) return n.status();
       std::lock_guard<std::mutex> l(q->trace_lock_);
       if (bool(*n) == (tracer(q) != nullptr)) return Status::OK();  // as the kernel: no change
       if (!*n) {
         trace_stop_locked(q);
         return Status::OK();
       }
       return trace_start_locked(q, q->trace_dir_, kBlktraceDefaultBuffer);
     }},
    {"trace/dir",
     [](const QueueImpl* q) {
       std::lock_guard<std::mutex> l(const_cast<QueueImpl*>(q)->trace_lock_);
       return q->trace_dir_;
     },
     [](QueueImpl* q, std::string_view v) -> Status {
       std::lock_guard<std::mutex> l(q->trace_lock_);
       if (tracer(q)) return Status::error(EBUSY, "trace/dir: a trace is running; write 0 to trace/enable first");
       q->trace_dir_ = std::string(v);
       return Status::OK();
     }},
    // The kernel's filters of a trace (kernel/trace/blktrace.c's sysfs
    // attributes; what they mean: core/blktrace_writer.h's Filter).
    {"trace/act_mask", [](const QueueImpl* q) { return trace_filter_show(q, "act_mask").value(); },
     [](QueueImpl* q, std::string_view v) { return trace_filter_store(q, "act_mask", trim(v)); }},
    {"trace/start_lba", [](const QueueImpl* q) { return trace_filter_show(q, "start_lba").value(); },
     [](QueueImpl* q, std::string_view v) { return trace_filter_store(q, "start_lba", trim(v)); }},
    {"trace/end_lba", [](const QueueImpl* q) { return trace_filter_show(q, "end_lba").value(); },
     [](QueueImpl* q, std::string_view v) { return trace_filter_store(q, "end_lba", trim(v)); }},
    {"trace/pid", [](const QueueImpl* q) { return trace_filter_show(q, "pid").value(); },
     [](QueueImpl* q, std::string_view v) { return trace_filter_store(q, "pid", trim(v)); }},
    // debugfs block/<dev>/dropped, where the kernel's blktrace tool reads
    // what its trace lost.
    {"trace/dropped", [](const QueueImpl* q) { return trace_filter_show(q, "dropped").value(); }, nullptr},
    {"dev", [](const QueueImpl* q) { return u(Queue::kDevMajor) + ":" + u(q->minor_); }, nullptr},
    // /sys/block/<dev>/ro; writable here, as the BLKROSET ioctl sets it.
    {"ro", [](const QueueImpl* q) { return u(q->tun_.read_only.load()); },
     [](QueueImpl* q, std::string_view v) -> Status {
       auto n = base::parse_uint("ro", v, 0, 1);
       if (!n) return n.status();
       q->tun_.read_only.store(*n != 0);
       return Status::OK();
     }},
};

// mq/<n>/<name>
unsigned tags_busy(const Tags* t) {
  return t->bitmap_tags.bitmap().weight() + t->breserved_tags.bitmap().weight();
}

Result<std::string> show_mq(const QueueImpl* q, std::string_view rest) {
  size_t slash = rest.find('/');
  if (slash == std::string_view::npos) return Status::invalid("mq: expected mq/<hctx>/<attribute>");
  auto idx = base::parse_uint("mq", rest.substr(0, slash), 0, q->nr_hw_queues_ ? q->nr_hw_queues_ - 1 : 0);
  if (!idx) return idx.status();
  const HwCtxImpl* h = q->hctx(static_cast<unsigned>(*idx));
  std::string_view name = rest.substr(slash + 1);
  if (name == "nr_tags") return u(h->tags->nr_tags);
  if (name == "nr_reserved_tags") return u(h->tags->nr_reserved);
  // debugfs's hctxN/tags and sched_tags "busy=" lines: tags allocated now.
  // With shared tags (a shared bitmap or a tag set shared by queues) they
  // count every user of the map, as the kernel's do.
  if (name == "tags_busy") return u(tags_busy(h->tags));
  if (name == "sched_tags_busy") return u(h->sched_tags ? tags_busy(h->sched_tags) : 0);
  if (name == "cpu_list") {
    std::string s;
    for (unsigned c : h->cpus) s += (s.empty() ? "" : ", ") + std::to_string(c);
    return s;
  }
  if (name == "type") return std::string(h->type == HctxType::dflt ? "default" : h->type == HctxType::read ? "read" : "poll");
  if (name == "queued") return u(h->queued.get());
  if (name == "run") return u(h->runs.get());
  if (name == "busy") return u(h->busy.get());
  if (name == "dispatch_busy") return u(h->dispatch_busy.load());
  // blkmq's own lock statistics (the kernel's come from lock_stat):
  // dispatch_lock_stat for the hctx lock (the dispatch list), ctx_lock_stat
  // for the software queues mapped to it, summed; tags_wait_lock_stat for
  // the wait queues of its driver tags (normal and reserved) and, with a
  // scheduler, of its scheduler tags, summed: where submitters that found
  // no tag queue up (the kernel's sbq_wait_state locks).
  if (name == "dispatch_lock_stat") return h->lock.stat().format();
  if (name == "tags_wait_lock_stat") {
    base::LockStat sum;
    for (const Tags* t : {h->tags, h->sched_tags}) {
      if (!t) continue;
      sum.add(t->bitmap_tags.wait_lock_stat());
      sum.add(t->breserved_tags.wait_lock_stat());
    }
    return sum.format();
  }
  if (name == "ctx_lock_stat") {
    base::LockStat sum;
    for (const SwCtx* c : h->ctxs) sum.add(c->lock.stat());
    return sum.format();
  }
  if (name == "dispatched") {
    static const char* kLabel[8] = {"0", "1", "2", "4", "8", "16", "32", "64"};
    std::string out;
    for (int b = 0; b < 8; b++) {
      char line[64];
      std::snprintf(line, sizeof line, "%s%8s\t%llu", b ? "\n" : "", kLabel[b], (unsigned long long)h->dispatched[b].get());
      out += line;
    }
    return out;
  }
  if (name == "state") {
    uint32_t st = h->state.load();
    std::string s;
    if (st & kHctxStopped) s += "STOPPED ";
    if (st & kHctxTagActive) s += "TAG_ACTIVE ";
    if (st & kHctxSchedRestart) s += "SCHED_RESTART ";
    return s;
  }
  return Status::invalid("mq: unknown attribute '" + std::string(name) + "'");
}

const ElvAttr* find_iosched(const QueueImpl* q, std::string_view name) {
  if (!q->elevator_) return nullptr;
  for (const ElvAttr& a : q->elevator_->type->attrs)
    if (a.name == name) return &a;
  return nullptr;
}

constexpr std::string_view kIosched = "queue/iosched/";
// cgroup/<group path>/<file>: the I/O groups' files (src/qos).
constexpr std::string_view kCgroup = "cgroup/";

const DriverAttr* find_driver_attr(const QueueImpl* q, std::string_view path) {
  for (const DriverAttr& a : q->cfg_.driver_attrs)
    if (a.name == path) return &a;
  return nullptr;
}

// The scheduler's file `file` of groups (ElvGroupAttr), or nullptr. Under
// sysfs_lock_.
const ElvGroupAttr* find_group_attr(const QueueImpl* q, std::string_view file) {
  if (!q->elevator_) return nullptr;
  for (const ElvGroupAttr& a : q->elevator_->type->group_attrs)
    if (a.name == file) return &a;
  return nullptr;
}

// cgroup/<group path>/<file> for a scheduler's group file: finds the group
// and holds it across the call, so a concurrent removal cannot free it.
// value == nullptr: show. Returns nullopt when no scheduler file matches
// (io.stat and the unknown go the way they went before).
std::optional<Result<std::string>> group_attr(QueueImpl* q, std::string_view rest, const std::string_view* value) {
  const size_t slash = rest.rfind('/');
  if (slash == std::string_view::npos) return std::nullopt;  // the root has none
  const std::string_view file = rest.substr(slash + 1), path = rest.substr(0, slash);
  std::lock_guard<std::mutex> sl(q->sysfs_lock_);
  const ElvGroupAttr* a = find_group_attr(q, file);
  if (!a) return std::nullopt;
  IoGroup* g;
  {
    std::lock_guard<std::mutex> l(blkcg_tree_lock());
    g = io_group_find_locked(path);
    if (g && g->parent) io_group_get(g);
  }
  const std::string name = "cgroup/" + std::string(rest);
  if (!g || !g->parent) return Result<std::string>(Status::error(ENOENT, name + ": no such I/O group"));
  Result<std::string> r = std::string();
  if (value) {
    Status st = a->store ? a->store(q->elevator_, g, *value) : Status::invalid(name + ": read-only attribute");
    if (!st) r = st;
  } else {
    r = a->show ? a->show(q->elevator_, g) : Result<std::string>(Status::invalid(name + ": write-only attribute"));
  }
  io_group_put(g);
  return r;
}

}  // namespace

Status queue_attr_store(QueueImpl* q, std::string_view path, std::string_view value) {
  if (path.substr(0, kIosched.size()) == kIosched) {
    std::lock_guard<std::mutex> g(q->sysfs_lock_);
    const ElvAttr* a = find_iosched(q, path.substr(kIosched.size()));
    if (!a) return Status::invalid(std::string(path) + ": no such scheduler attribute for the current scheduler");
    if (!a->store) return Status::invalid(std::string(path) + ": read-only");
    return a->store(q->elevator_, trim(value));
  }
  for (const Attr& a : kAttrs) {
    if (path != a.name) continue;
    if (!a.store) return Status::invalid(std::string(path) + ": read-only attribute");
    // As sysfs takes what `echo` writes: the newline and blanks around it.
    return a.store(q, trim(value));
  }
  if (iolatency_attr_is(path)) return iolatency_attr_store(q, path, trim(value));
  if (iocost_attr_is(path)) return iocost_attr_store(q, path, trim(value));
  if (path.substr(0, kCgroup.size()) == kCgroup) {
    const std::string trimmed = trim(value);  // owned: the view below must not outlive it
    const std::string_view v = trimmed;
    if (auto r = group_attr(q, path.substr(kCgroup.size()), &v)) return r->ok() ? Status::OK() : r->status();
    return blkcg_attr_store(q, path.substr(kCgroup.size()), value);
  }
  if (path.substr(0, 3) == "mq/") return Status::invalid(std::string(path) + ": read-only attribute");
  if (const DriverAttr* d = find_driver_attr(q, path)) {
    if (!d->store) return Status::invalid(std::string(path) + ": read-only attribute");
    return d->store(trim(value));
  }
  return Status::invalid("unknown attribute '" + std::string(path) + "'");
}

Result<std::string> queue_attr_show(const QueueImpl* q, std::string_view path) {
  if (path.substr(0, kIosched.size()) == kIosched) {
    std::lock_guard<std::mutex> g(const_cast<QueueImpl*>(q)->sysfs_lock_);
    const ElvAttr* a = find_iosched(q, path.substr(kIosched.size()));
    if (!a || !a->show) return Status::invalid(std::string(path) + ": no such scheduler attribute");
    return a->show(q->elevator_);
  }
  for (const Attr& a : kAttrs) {
    if (path != a.name) continue;
    if (a.show == show_stat || a.show == show_inflight) return a.show(q);
    std::lock_guard<std::mutex> g(const_cast<QueueImpl*>(q)->sysfs_lock_);
    return a.show(q);
  }
  if (iolatency_attr_is(path)) return iolatency_attr_show(q, path);
  if (iocost_attr_is(path)) return iocost_attr_show(q, path);
  if (path.substr(0, kCgroup.size()) == kCgroup) {
    if (auto r = group_attr(const_cast<QueueImpl*>(q), path.substr(kCgroup.size()), nullptr)) return *r;
    return blkcg_attr_show(q, path.substr(kCgroup.size()));
  }
  if (path.substr(0, 3) == "mq/") {
    // The hctxs stay while an update of the hw queues cannot run.
    std::shared_lock<std::shared_mutex> l(q->set_->update_lock_);
    return show_mq(q, path.substr(3));
  }
  if (const DriverAttr* d = find_driver_attr(q, path)) {
    if (!d->show) return Status::invalid(std::string(path) + ": write-only attribute");
    return d->show();
  }
  return Status::invalid("unknown attribute '" + std::string(path) + "'");
}

std::vector<std::string> queue_attr_names(const QueueImpl* q) {
  // The list follows the scheduler (iosched/) and the hw queue count (mq/):
  // neither may change while it is read. Lock order as the stores take them.
  std::shared_lock<std::shared_mutex> l(q->set_->update_lock_);
  std::lock_guard<std::mutex> g(const_cast<QueueImpl*>(q)->sysfs_lock_);
  std::vector<std::string> v;
  for (const Attr& a : kAttrs) v.push_back(a.name);
  if (q->elevator_)
    for (const ElvAttr& a : q->elevator_->type->attrs) v.push_back(std::string(kIosched) + a.name);
  for (unsigned i = 0; i < q->nr_hw_queues_; i++)
    for (const char* n : {"nr_tags", "nr_reserved_tags", "tags_busy", "sched_tags_busy", "cpu_list", "type",
                          "queued", "run", "busy", "dispatch_busy", "dispatched", "state",
                          "dispatch_lock_stat", "ctx_lock_stat", "tags_wait_lock_stat"})
      v.push_back("mq/" + std::to_string(i) + "/" + n);
  for (const DriverAttr& a : q->cfg_.driver_attrs) v.push_back(a.name);
  // cgroup/<group>/io.stat for every group: the tree is process-wide, so
  // every queue lists every group, as every cgroup has every device's line.
  for (std::string& n : blkcg_attr_names()) v.push_back(std::move(n));
  for (std::string& n : iolatency_attr_names()) v.push_back(std::move(n));
  for (std::string& n : iocost_attr_names()) v.push_back(std::move(n));
  // The scheduler's group files (io.bfq.weight), for every group but the
  // root, as the kernel's policy files are not on the root cgroup.
  if (q->elevator_ && !q->elevator_->type->group_attrs.empty())
    for (const std::string& p : io_group_list())
      if (p != "/")
        for (const ElvGroupAttr& a : q->elevator_->type->group_attrs) v.push_back("cgroup" + p + "/" + a.name);
  return v;
}

}  // namespace blkmq

// The request queue: where bios are submitted, with its limits, attributes,
// statistics and lifecycle (request_queue + gendisk analogue).
#pragma once

#include <atomic>
#include <climits>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "blkmq/bio.h"
#include "blkmq/runtime.h"
#include "blkmq/status.h"
#include "blkmq/zoned.h"
#include "blkmq/driver/tagset.h"

namespace blkmq {

// Device limits (queue_limits). Sizes in bytes unless named _sectors.
struct QueueLimits {
  uint32_t logical_block_size = 512;   // power of two, 512..4096
  uint32_t physical_block_size = 512;
  uint32_t max_hw_sectors = 2560;      // what the device accepts per request (1280 KiB)
  uint32_t max_sectors = 2560;         // soft limit, queue/max_sectors_kb, <= max_hw_sectors
  uint16_t max_segments = 128;
  uint32_t max_segment_size = 1u << 20;
  uint64_t capacity_sectors = 0;       // device size; I/O beyond it fails with inval
  bool write_cache = false;            // volatile cache: flushes are needed
  bool fua = false;                    // native FUA; else emulated with a post-flush
  uint32_t max_discard_sectors = 0;    // 0: discard not supported
  uint32_t max_write_zeroes_sectors = 0;
  bool rotational = false;
  bool poll = false;                   // the tag set has poll queues
  // Mask every data vector's address and length must clear
  // (queue/dma_alignment); 2^n - 1, below 4096. The kernel's default is 511
  // (SECTOR_SIZE - 1); blkmq's is 0, any address, because only a driver that
  // hands the buffers to a device (uring with direct=1) has a requirement,
  // and it sets its own. See docs/ARCHITECTURE.md.
  uint32_t dma_alignment = 0;

  // Zoned devices (the kernel's zoned queue limits). A zoned device is
  // host-managed: a sequential zone takes writes only at its write
  // pointer. Its zone size is chunk_sectors; the last zone may be shorter.
  bool zoned = false;
  // The boundary no request crosses: bios are split at its multiples
  // (a zone's end when zoned). 0: none; else a power of two, and at least
  // one logical block. Required when zoned.
  uint32_t chunk_sectors = 0;
  // The largest zone append the device takes natively (zone_append_max_bytes
  // shows it in bytes). 0: the device has no native append, and the core
  // emulates it with writes at the write pointer (zone write plugging); the
  // attribute then shows what the emulation takes, the smaller of
  // max_sectors and the zone size, as the kernel's does.
  uint32_t max_zone_append_sectors = 0;
  // Zoned only. The smallest write the device takes in a sequential zone
  // (queue/zone_write_granularity); 0 means the logical block size.
  uint32_t zone_write_granularity = 0;
  // Zoned only. The open and active zone limits, 0 for none. A device with
  // neither and more sequential zones than 128 advertises
  // max_open_zones=128, the size of the kernel's write plug pool.
  unsigned max_open_zones = 0;
  unsigned max_active_zones = 0;
};

// An attribute a driver adds beside the core's, as a kernel driver adds
// files under /sys/block/<dev>/device/ (null's `device/power_cut`). Read,
// written and listed by its full path through Queue::attr, set_attr and
// attr_names, so also by `--attr` and the control socket. A name the core
// has itself is shadowed by the core's. Empty show: write-only; empty
// store: read-only. Both run in the calling thread (task context), under
// no core lock, while I/O may run: they must be thread-safe and may sleep.
// What they capture must live as long as the queue (the driver's device
// owns both).
struct DriverAttr {
  std::string name;
  std::function<Result<std::string>()> show;
  std::function<Status(std::string_view value)> store;
};

struct QueueConfig {
  std::string name = "blkmq0";         // the "device" name in reports
  QueueLimits limits;
  void* queuedata = nullptr;           // driver cookie, see queue_data()
  // Scheduler at creation: "" = the kernel's default rule. Validated.
  std::string scheduler;
  // The driver's own attributes (see DriverAttr). Default: none.
  std::vector<DriverAttr> driver_attrs;
  // A zoned device's zone report (block_device_operations::report_zones):
  // up to `max` zones from the one holding `sector`, each a snapshot of
  // the device's own state. Required when limits.zoned. The core calls it
  // at creation, to learn the zones (which are conventional, the written
  // ones' write pointers), for Queue::report_zones, and to resynchronize a
  // zone's write pointer after a failed write. Task context, outside any
  // core lock; it may sleep, and must not wait for I/O on this queue.
  std::function<Result<std::vector<Zone>>(uint64_t sector, unsigned max)> report_zones;
};

// Kernel /sys/block/<dev>/stat fields, in order.
struct DiskStat {
  uint64_t read_ios, read_merges, read_sectors, read_ticks_ms;
  uint64_t write_ios, write_merges, write_sectors, write_ticks_ms;
  uint64_t in_flight, io_ticks_ms, time_in_queue_ms;
  uint64_t discard_ios, discard_merges, discard_sectors, discard_ticks_ms;
  uint64_t flush_ios, flush_ticks_ms;
};

// Per-hctx counters (debugfs analogues).
struct HctxStats {
  uint64_t queued = 0;        // requests handed to this hctx
  uint64_t run = 0;           // times the hctx was run
  uint64_t dispatched[8] = {};  // dispatch batches by size: 0,1,2,4,8,16,32,64+
  uint64_t busy = 0;          // driver returned resource/dev_resource
  uint64_t dispatch_busy = 0; // current EWMA value
};

// What Queue::stop_blktrace found.
struct BlktraceResult {
  bool was_running = false;
  std::string path_prefix;    // <dir>/<name>: blkparse -i this
  uint64_t dropped = 0;       // events lost to full buffers
  uint64_t write_errors = 0;  // buffers the files did not take
};

// Per-CPU buffer of a blktrace when start_blktrace is given 0: 2 MiB, the
// blktrace tool's default (buf_size 512 KiB x buf_nr 4).
constexpr size_t kBlktraceDefaultBuffer = 2u << 20;

// The warning for a trace that lost events, one line for stderr or a log:
// how many events the full buffers dropped and how many buffers the files
// did not take, and how to trace less. `how` names the means the caller
// offers (a tool's options); "" names the queue attributes trace/act_mask,
// start_lba, end_lba and pid. "" if the trace lost nothing. Any thread;
// allocates.
std::string blktrace_drop_warning(const BlktraceResult& r, const std::string& how = "");

class Queue {
 public:
  // Creates a queue on the tag set (several queues may share one set: their
  // tags are then shared fairly). Task context.
  static Result<std::unique_ptr<Queue>> create(TagSet& set, const QueueConfig& cfg);
  // Teardown: marks the queue dying, waits for all submitted bios to end
  // (in-flight I/O drains; queued I/O is dispatched), then frees. Bios
  // submitted after teardown begins end with ioerr.
  virtual ~Queue();

  // Submits a bio. Task context (any application thread). Never blocks except
  // to wait for a tag or a freeze, and not even then with kBioNowait. The bio
  // ends exactly once through bio->end_io, possibly before this returns.
  // Bad bios (out of range, misaligned, unsupported op) end with inval /
  // notsupp and touch nothing.
  void submit_bio(Bio* bio);

  // Polls the hctx a polled bio was queued on, ending what completed there.
  // Returns the number of completions found. Safe against a concurrent
  // update_nr_hw_queues or scheduler switch (it finds nothing while they
  // hold the queue frozen and quiesced). A freeze waits for polled
  // requests, which only a poll ends: a thread that polls for its own bios
  // submits them with kBioNowait (as io_uring's polled I/O does) and polls
  // what it has in flight when one ends with `again`, or a freeze can
  // stall until those requests time out. Task context.
  int poll(const Bio* bio);

  // Waits for completions the way a submitter sleeping for its I/O does:
  // sleeps while *word == val until a wake_waiters(word) arrives (a raw
  // FUTEX_WAKE on the word does not reach a thread asleep in a device), and
  // may return early or spuriously, so the caller loops on its own
  // condition. Where the driver of the hw queue `bio` went to can
  // deliver completions to the thread that waits (uring: the ring runs
  // the I/O's completion work in its submitter), the thread sleeps in the
  // device instead and completes what arrives there, routed as an
  // interrupt's would be, so a completion reaches its waiter with no
  // hand-off through a reaper thread. Other drivers: a plain futex wait.
  // `bio` must have been submitted to this queue (its hctx is read from it;
  // it may have completed since). A polled bio (kBioPolled) is ended only
  // by Queue::poll: waiting for it here sleeps until something else wakes
  // the word. Task context; never from end_io. Cost: a plain futex wait,
  // or (uring) one io_uring_enter plus two short locked sections.
  void wait(const Bio* bio, std::atomic<uint32_t>* word, uint32_t val);

  // Driver-private ("passthrough") commands, as blk_mq_alloc_request and
  // blk_execute_rq: a request with no bio that bypasses merging and the
  // scheduler and goes to the head of the hctx dispatch list. `reserved`
  // takes a tag from TagSetConfig::reserved_tags (never starved by normal
  // I/O); `nowait` returns nullptr instead of sleeping for a tag. Set
  // rq->end_io before execute_request_nowait; it runs once when the driver
  // ends the request (return true to have the core free it). Task context.
  Request* alloc_request(ReqOp op, bool reserved = false, bool nowait = false);
  void execute_request_nowait(Request* rq);
  // Issues the request and waits for it; the request is freed on return.
  BlkStatus execute_request(Request* rq);
  // Frees a request from alloc_request that was never executed.
  void free_request(Request* rq);

  // Synchronous helpers: build a bio, submit, wait. Task context; sleeps.
  BlkStatus read_sync(void* buf, uint64_t offset, uint32_t len);
  BlkStatus write_sync(const void* buf, uint64_t offset, uint32_t len, uint32_t flags = 0);
  BlkStatus flush_sync();

  // Zoned devices (QueueLimits::zoned). report_zones: up to `max` zones
  // from the one holding `sector`, as the driver reports them (the
  // kernel's blkdev_report_zones; BLKREPORTZONE). EOPNOTSUPP on a device
  // that is not zoned, EINVAL past its end. Task context; calls the driver.
  Result<std::vector<Zone>> report_zones(uint64_t sector, unsigned max) const;
  // A zone management command through the block layer, waited for
  // (blkdev_zone_mgmt): `sector` is the zone's first sector (0 for
  // reset_all). notsupp on a device that is not zoned, inval for a
  // sector that is not a zone's start. Task context; sleeps.
  BlkStatus zone_mgmt_sync(ZoneOp op, uint64_t sector);
  // The number of zones (queue/nr_zones); 0 when not zoned. Any thread.
  unsigned nr_zones() const;

  // Attributes, named as under /sys/block/<dev>/ (queue/scheduler,
  // queue/nr_requests, queue/rq_affinity, stat, mq/0/..., ...). A bad path or
  // value is refused with a message and changes nothing. Task context.
  Status set_attr(std::string_view path, std::string_view value);
  Result<std::string> attr(std::string_view path) const;
  std::vector<std::string> attr_names() const;

  // Freeze: new submitters wait; returns when no request is allocated.
  // Nests. Quiesce: no dispatch runs until unquiesce; returns when any
  // dispatch in progress has left. Task context; both sleep.
  void freeze();
  void unfreeze();
  void quiesce();
  void unquiesce();

  // The runtime of the queue's tag set (TagSetConfig::runtime): whose
  // kblockd runs its hw queues, whose softirq workers its completions,
  // whose timers its timeouts and scheduler timers, and whose clock it
  // keeps time by. Any thread.
  Runtime& runtime() const;
  // The queue's clock, in ns: its runtime's (CLOCK_MONOTONIC, or a
  // ManualRuntime's). Everything of this queue that keeps time reads it:
  // request deadlines and the timeout scan, accounting (ticks, io_ticks),
  // the schedulers' decisions (mq-deadline's FIFO and aging, bfq's budgets,
  // idling and raising, kyber's latency windows). A vDSO read, or one load
  // on a manual runtime; any context.
  uint64_t now_ns() const;
  // The same clock at the resolution of the kernel's jiffies:
  // CLOCK_MONOTONIC_COARSE (a vDSO read without the TSC; it moves once a
  // timer tick, a few ms), or the manual runtime's time. For the decisions
  // the kernel takes in jiffies (mq-deadline's FIFO expiry and aging). Any
  // context.
  uint64_t coarse_now_ns() const;

  // Starts removal, as del_gendisk marks a disk dead: every bio submitted
  // from now on ends with ioerr at once, submitters waiting for a freeze
  // wake and end theirs with ioerr, alloc_request returns nullptr; I/O
  // already in flight or queued completes normally, except bios io.max
  // holds back (docs/QOS.md): they end with ioerr here, on the caller's
  // thread, as the kernel's are cancelled at del_gendisk. Lets a device go away
  // while other threads still submit to it: they see errors, stop, and
  // then the queue is destroyed. Irreversible, idempotent; any thread.
  void mark_dead();

  // blktrace: records the kernel's block trace events of this queue (Q G I
  // D C M F P U R X S and process names; see src/core/trace.h) into
  // <dir>/<name>.blktrace.<cpu>, the files `blkparse -i <dir>/<name>`, btt
  // and iowatcher read, as `blktrace -d` writes them for a kernel device.
  // Events go to per-CPU buffers of `buffer_bytes_per_cpu` (0: the
  // default); a writer thread empties them every 5 ms; a full buffer drops
  // events, counted (blktrace_drop_warning says how to trace less). Only
  // the events that pass the trace's filters are recorded: the attributes
  // trace/act_mask (categories: read, write, queue, issue, complete, ...),
  // trace/start_lba and trace/end_lba (a sector range) and trace/pid (one
  // thread), with the kernel's names and text forms; they may be written
  // before the trace starts, while it runs, or between traces, and a new
  // trace keeps them (the kernel's start from scratch). Default: every
  // event. Error if one is running or a file cannot be made. The same as
  // writing trace/dir and then 1 to trace/enable. Task context.
  Status start_blktrace(const std::string& dir, size_t buffer_bytes_per_cpu = 0);
  // Stops it; on return every event recorded is in the files, which are
  // closed. An event racing the stop may be dropped. Nothing running: a
  // result with was_running false. Task context.
  BlktraceResult stop_blktrace();

  const QueueLimits& limits() const;
  const std::string& name() const;
  // The device number blktrace records, the `dev` attribute and a sysfs
  // tree carry: major kDevMajor, and a minor unique among the queues this
  // process has created (from 0, never reused). 240 is the first of
  // Linux's majors for local/experimental use (devices.txt), so no real
  // device's records mix with a blkmq device's in blkparse or btt.
  static constexpr unsigned kDevMajor = 240;
  unsigned dev_minor() const;
  TagSet& tag_set() const;
  DiskStat disk_stat() const;
  unsigned nr_hw_queues() const;
  HctxStats hctx_stats(unsigned hctx) const;

 protected:
  Queue() = default;
};

// Wakes up to `nr` futex sleepers on `word` and every thread sleeping for
// it in a device through Queue::wait (their wake channels); the waker
// changes *word first. Any context; cost: a futex wake, a short spinlock,
// and one more futex wake per thread found asleep in a device.
void wake_waiters(std::atomic<uint32_t>* word, int nr = INT_MAX);

}  // namespace blkmq

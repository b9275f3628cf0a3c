// Writes one device's blktrace records to <dir>/<dev>.blktrace.<cpu>, the
// files blkparse, btt and iowatcher read (`blkparse -i <dir>/<dev>`): the
// blktrace tool's output, made by blkmq itself since its requests never
// reach the kernel's block layer. Events go into a per-CPU buffer (no lock
// shared between CPUs, nothing written on the traced path); a writer thread
// moves the buffers to the files every few milliseconds, or as soon as one
// is half full, as the kernel's relay channels are drained by blktrace.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/spinlock.h"
#include "blkmq/status.h"
#include "trace/blktrace_format.h"

namespace blkmq::blktrace {

// What a trace records (struct blk_trace's act_mask, start_lba, end_lba
// and pid, the trace/ sysfs attributes): an event is recorded only if it
// has a category of act_mask, its sector is 0 or within [start_lba,
// end_lba] (both included, as the kernel's act_log_check), and pid is 0
// or the thread that caused it.
struct Filter {
  uint16_t act_mask = kAllCategories;
  uint64_t start_lba = 0;
  uint64_t end_lba = UINT64_MAX;
  uint32_t pid = 0;
};

class Writer {
 public:
  // A writer in the kernel's Blktrace_setup state: it holds `filter`, has
  // no files and records nothing until start(). Task context.
  explicit Writer(const Filter& filter);
  // Creates <dir> if needed and one empty file per possible CPU, numbered
  // from 0 without gaps (blkparse stops at the first missing number), and
  // starts the writer thread. `device` is the dev_t the records carry
  // (make_dev). Error if a file cannot be created or the writer started
  // before; a failed start leaves it in the setup state. Task context.
  Status start(const std::string& dir, const std::string& dev_name, uint32_t device,
               size_t buffer_bytes_per_cpu);
  // Writer(filter) and start(): for tests and for callers with no filter.
  static Result<std::unique_ptr<Writer>> open(const std::string& dir, const std::string& dev_name,
                                              uint32_t device, size_t buffer_bytes_per_cpu = 1 << 20,
                                              const Filter& filter = Filter{});
  // close(), if it was not called.
  ~Writer();
  // start() succeeded once (the writer may have been closed since).
  bool started() const { return nr_cpus_ != 0; }

  // Whether an event of `what` (action and categories) at `sector` passes
  // the filter (act_log_check); false costs one to three relaxed loads, so
  // the caller asks before it reads the clock. Any context.
  bool wants(uint32_t what, uint64_t sector) const {
    if (!((uint32_t{act_mask_.load(std::memory_order_relaxed)} << kTcShift) & what)) return false;
    if (sector && (sector < start_lba_.load(std::memory_order_relaxed) ||
                   sector > end_lba_.load(std::memory_order_relaxed)))
      return false;
    const uint32_t pid = pid_.load(std::memory_order_relaxed);
    return !pid || pid == current_thread_id();
  }
  // The filter now, and changing it: allowed at any time, as the kernel
  // allows the trace/ attributes to change while a trace runs; an event
  // racing a change sees the old or the new value of each field. Any
  // thread (the queue's trace_lock_ orders the writers of one queue).
  Filter filter() const;
  void set_filter(const Filter& f);
  // The calling thread's id (gettid), as the records carry it. Any context.
  static uint32_t current_thread_id();
  // Stops the writer thread, writes out everything recorded and closes the
  // files; frees the buffers. add() may still be called, by a thread that
  // picked this writer up just before its owner stopped tracing: such an
  // event is dropped (and counted). Task context; idempotent.
  void close();

  // Records one event on the calling CPU, stamped with `time_ns`, the
  // calling thread and CPU, and the next sequence number of that CPU; the
  // first event of a thread is preceded by its name (a process notify
  // record). Never blocks or allocates: when the CPU's buffer is full the
  // event is dropped and counted, as the kernel's relay buffers drop. Any
  // context; a few dozen instructions and one uncontended spinlock.
  void add(uint32_t action, uint64_t time_ns, uint64_t sector, uint32_t bytes, uint16_t error = 0,
           const void* pdu = nullptr, uint16_t pdu_len = 0);
  // add() with an 8-byte big-endian payload, as U (the unplug depth) and X
  // (the split's new sector) carry.
  void add_u64(uint32_t action, uint64_t time_ns, uint64_t sector, uint32_t bytes, uint64_t value);

  // Writes out what the buffers hold now and returns when it is in the
  // files. Task context.
  void flush();
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  uint64_t write_errors() const { return write_errors_.load(std::memory_order_relaxed); }
  const std::string& path_prefix() const { return prefix_; }  // <dir>/<dev>

 private:
  struct alignas(64) CpuBuffer {
    base::SpinLock lock;
    std::vector<uint8_t> data;  // capacity reserved at open, never grown
    uint32_t sequence = 0;
    bool closed = false;
  };

  // The fields every record of this writer's calling thread shares.
  Record header(unsigned cpu, uint32_t action, uint64_t time_ns, uint16_t pdu_len) const;
  // Copies r and its payload into the CPU's buffer; `numbered` gives it the
  // CPU's next sequence number.
  void append(unsigned cpu, const Record& r, const void* pdu, bool numbered);
  void notify_thread(unsigned cpu, uint64_t time_ns);
  void drain();
  void run();

  // The Filter's fields, each read alone on the traced path.
  std::atomic<uint16_t> act_mask_;
  std::atomic<uint64_t> start_lba_, end_lba_;
  std::atomic<uint32_t> pid_;
  std::string prefix_;
  uint32_t device_ = 0;
  size_t capacity_ = 0;
  std::vector<int> fds_;
  std::unique_ptr<CpuBuffer[]> cpus_;
  std::vector<std::vector<uint8_t>> spare_;  // the writer's half of each CPU's buffer pair
  unsigned nr_cpus_ = 0;
  uint64_t generation_ = 0;
  std::atomic<uint64_t> dropped_{0}, write_errors_{0};
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> flush_requests_{0}, flushed_{0};
  // Wakes the writer before its period ends: a CPU's buffer reached half
  // its size, a flush was asked for, or the writer is stopping.
  std::atomic<uint32_t> kick_{0};
  void kick();
  std::thread thread_;
};

}  // namespace blkmq::blktrace

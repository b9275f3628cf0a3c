// One job thread of `blkmq bench`: a fixed set of preallocated I/O units
// cycled through a blkmq queue, fio-style, with per-job statistics.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "blkmq/bio.h"
#include "blkmq/queue.h"
#include "bench/iolog.h"
#include "bench/options.h"
#include "bench/randmap.h"
#include "bench/stats.h"
#include "bench/zbd.h"

namespace bench {

class Job {
 public:
  // index: the clone number within numjobs (varies the random seeds).
  Job(const JobSpec& spec, unsigned index, blkmq::Queue& q, uint64_t dev_size);
  ~Job();
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  // Resolves the region against the device and allocates every I/O unit and
  // buffer, so the I/O loop allocates nothing. Control thread, before run().
  Status prepare();
  // The thread body: runs the workload, drains every submitted bio, fills
  // result(). The Job must outlive every end_io call: destroy the device
  // (which stops its completion threads) before the Job.
  void run();

  // Control thread: the ramp is over (reset statistics), or stop submitting.
  void end_ramp() { ramp_over_.store(true, std::memory_order_relaxed); }
  void stop() { stop_.store(true, std::memory_order_relaxed); }
  bool finished() const { return finished_.load(std::memory_order_acquire); }

  const JobSpec& spec() const { return spec_; }
  blkmq::Queue& queue() const { return q_; }
  // The memory every I/O unit's buffer lies in (fixedbufs registers it).
  // Valid after prepare().
  iovec buffer_region() const { return {buffers_, buffer_bytes_}; }
  const JobResult& result() const { return *result_; }
  // For the status line, any thread: I/Os completed in direction ddir (ramp
  // included). Published once per reaped batch, so it lags by a batch.
  uint64_t done_ios(unsigned ddir) const { return done_ios_[ddir & 1].load(std::memory_order_relaxed); }
  // Bytes the job moves if it runs to its size (verify: both passes); 0 for
  // time_based. Valid after prepare().
  uint64_t planned_bytes() const;
  bool in_ramp() const { return spec_.ramp_ns != 0 && !ramp_over_.load(std::memory_order_relaxed); }
  // The job's --write_*_log samples; write() them once finished() is true.
  const IoLog& io_log() const { return log_; }

 private:
  struct alignas(64) IoUnit {
    blkmq::Bio bio;
    iovec iov;
    Job* job;
    IoUnit* next;        // on a completion list
    uint64_t offset;
    uint64_t start_ns;   // batch submit start
    uint64_t issue_ns;   // batch submit return
    uint8_t ddir;
    bool inflight;
  };
  enum class Phase : uint8_t { normal, verify_write, verify_read };
  enum class Mix : uint8_t { reads, writes, mixed };

  static void end_io(blkmq::Bio* bio);
  void push_remote(IoUnit* u);

  void run_phase(Phase ph);
  void reset_generators();
  void submit_batch(unsigned n);
  void submit_batch_zbd(unsigned n);
  void submit_units(unsigned n);
  // What prep() made of the next unit: ready, or (zonemode=zbd) its zone
  // must be reset first, or no zone can take it and the job is done.
  enum class Prep : uint8_t { ready, reset_zone, eof };
  Prep prep(IoUnit* u);
  Prep zbd_adjust(IoUnit* u, bool write);
  bool zbd_reset();
  blkmq::Status prepare_zbd(uint64_t* size);
  void prep_replay(IoUnit* u);
  void fill_bio(IoUnit* u, bool write, uint32_t len);
  blkmq::Status prepare_replay();
  unsigned reap_ready();
  unsigned process_list(IoUnit* u, uint64_t now);
  void process(IoUnit* u, uint64_t now);
  void wait_completions(unsigned need);
  void sleep_for_remote(unsigned need);
  void poll_once();
  void resubmit_retries();
  const blkmq::Bio* inflight_bio();
  void check_ramp();
  void begin_measure();
  // cgroup= (fio): joins the job's I/O group at the start of run(), leaves
  // it (and removes it unless cgroup_nodelete) at the end. Job thread.
  void join_cgroup();
  void leave_cgroup();
  void record_error(const IoUnit* u, int err, std::string msg);

  JobSpec spec_;  // offset made absolute for this clone by prepare()
  const unsigned index_;
  blkmq::Queue& q_;
  const uint64_t dev_size_;

  // Derived at prepare().
  uint64_t base_ = 0;     // first byte of the region
  uint64_t nblocks_ = 0;  // region size in bs units
  uint32_t unit_bytes_ = 0;  // each I/O unit's buffer: bs, or the largest replayed I/O
  ReplayTrace replay_;       // --read_iolog's I/O (empty without it)
  std::unique_ptr<ZbdJob> zbd_;  // zonemode=zbd (null without it)
  unsigned zbd_reset_zone_ = 0;  // the zone prep() found needing a reset
  size_t replay_next_ = 0;
  uint64_t replay_start_ns_ = 0;
  uint16_t ioprio_ = blkmq::kIoprioDefault;
  uint32_t bio_flags_ = 0;
  bool gtod_ = true;      // per-I/O time stamps
  uint64_t seed_ = 0;

  std::unique_ptr<IoUnit[]> units_;
  void* buffers_ = nullptr;
  size_t buffer_bytes_ = 0;
  std::unique_ptr<IoUnit*[]> free_;
  std::unique_ptr<IoUnit*[]> batch_;
  unsigned nfree_ = 0;
  unsigned inflight_ = 0;
  unsigned poll_cursor_ = 0;
  // hipri: bios that found no tag (kBioNowait, BlkStatus::again), to submit
  // again after a poll has freed some; still counted in inflight_.
  std::vector<IoUnit*> retry_;
  std::vector<IoUnit*> retrying_;  // resubmit_retries' batch (kept: no allocation per pass)

  // Loop state, job thread only.
  Phase phase_ = Phase::normal;
  Mix mix_ = Mix::reads;
  uint64_t issued_ = 0;
  uint64_t target_ = 0;
  uint64_t seq_next_ = 0;
  uint64_t verify_written_ = 0;
  bool stopping_ = false;   // an error or the stop flag: submit no more
  bool measuring_ = false;  // ramp over, statistics count
  uint64_t start_ns_ = 0;
  CpuUsage cpu_start_;
  RandomMap map_{1, 0};
  Xoshiro256 rng_{0};
  Xoshiro256 mix_rng_{0};
  IoUnit* local_head_ = nullptr;  // completions that ran on the job thread
  IoLog log_;                     // job thread only, until it finished
  uint64_t ramp_ios_[2] = {0, 0};  // completed before the statistics were reset
  std::unique_ptr<JobResult> result_;

  // Written by other threads: each on its own cache line.
  alignas(64) std::atomic<IoUnit*> remote_head_{nullptr};
  alignas(64) std::atomic<uint32_t> remote_count_{0};  // pushed, not yet reaped; the wait word
  std::atomic<uint32_t> wait_for_{0};                 // >0: job sleeps until that many
  alignas(64) std::atomic<bool> ramp_over_{false};
  std::atomic<bool> stop_{false};
  std::atomic<bool> finished_{false};
  alignas(64) std::atomic<uint64_t> done_ios_[2] = {0, 0};  // job thread writes, status line reads
};

}  // namespace bench

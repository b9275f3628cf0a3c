#include "bench/job.h"

#include <time.h>

#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>

#include "blkmq/iogroup.h"
#include "blkmq/plug.h"
#include "bench/layout.h"
#include "base/clock.h"
#include "bench/verify.h"

namespace bench {
namespace {

using blkmq::base::now_ns;

inline void cpu_relax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

// The job running on this thread: end_io compares against it to tell an
// inline completion (plain list, no atomics) from a cross-thread one.
thread_local Job* tl_job = nullptr;

}  // namespace

Job::Job(const JobSpec& spec, unsigned index, blkmq::Queue& q, uint64_t dev_size)
    : spec_(spec), index_(index), q_(q), dev_size_(dev_size), result_(std::make_unique<JobResult>()) {}

Job::~Job() { std::free(buffers_); }

Status Job::prepare() {
  const uint32_t lbs = q_.limits().logical_block_size;
  spec_.offset += uint64_t{index_} * spec_.offset_increment;
  if (spec_.bs % lbs != 0 || spec_.offset % lbs != 0)
    return Status::invalid("--bs and --offset must be multiples of the device's logical block size " +
                           std::to_string(lbs));
  if (spec_.offset >= dev_size_)
    return Status::invalid("--offset=" + std::to_string(spec_.offset) + " is beyond the device size " +
                           std::to_string(dev_size_));
  uint64_t size = spec_.size ? spec_.size : dev_size_ - spec_.offset;
  if (size > dev_size_ - spec_.offset)
    return Status::invalid("--offset + --size (" + std::to_string(spec_.offset + size) +
                           ") is beyond the device size " + std::to_string(dev_size_));
  if (spec_.zbd.enabled)
    if (Status st = prepare_zbd(&size); !st) return st;
  base_ = spec_.offset;
  nblocks_ = size / spec_.bs;
  if (nblocks_ == 0) return Status::invalid("the region is smaller than one block (--bs)");
  unit_bytes_ = spec_.bs;
  if (!spec_.read_iolog.empty())
    if (Status st = prepare_replay(); !st) return st;

  const unsigned depth = spec_.iodepth;
  const size_t unit = (unit_bytes_ + 4095) & ~size_t{4095};
  buffer_bytes_ = static_cast<size_t>(depth) * unit;
  if (posix_memalign(&buffers_, 4096, buffer_bytes_) != 0)
    return Status::error(ENOMEM, "cannot allocate " + std::to_string(depth) + " buffers of " +
                                     std::to_string(unit) + " bytes");
  // Touch every page now, so the run takes no page faults.
  std::memset(buffers_, kBufferFill, static_cast<size_t>(depth) * unit);
  units_ = std::make_unique<IoUnit[]>(depth);
  free_ = std::make_unique<IoUnit*[]>(depth);
  batch_ = std::make_unique<IoUnit*[]>(depth);
  for (unsigned i = 0; i < depth; ++i) {
    IoUnit& u = units_[i];
    u = IoUnit{};
    u.job = this;
    u.iov.iov_base = static_cast<char*>(buffers_) + static_cast<size_t>(i) * unit;
    u.iov.iov_len = unit_bytes_;
    free_[i] = &u;
  }
  nfree_ = depth;

  // The logs need the time stamps gtod_reduce would save.
  gtod_ = !spec_.gtod_reduce || spec_.log.any();
  log_.init(spec_.log, spec_.bs, spec_.prioclass == 1);
  // Polled bios must not sleep for a tag: only this thread's polling frees
  // them (a poll queue has no interrupt), so as io_uring does with IOPOLL
  // they go nowait, and one that finds no tag is polled for and retried.
  bio_flags_ = spec_.hipri ? uint32_t{blkmq::kBioPolled | blkmq::kBioNowait} : 0u;
  if (spec_.prioclass > 0)
    ioprio_ = blkmq::ioprio_value(static_cast<blkmq::IoprioClass>(spec_.prioclass), static_cast<unsigned>(spec_.prio));
  // randrepeat=0: a new sequence each run; else fixed per seed and clone.
  uint64_t seed = spec_.randrepeat ? spec_.randseed : std::random_device{}() ^ now_ns();
  seed_ = seed ^ (0x9e3779b97f4a7c15ull * (index_ + 1));
  if (spec_.randseed_given) seed_ = spec_.randseed + index_;

  JobResult& r = *result_;
  r.name = spec_.name;
  r.gtod_reduce = spec_.gtod_reduce;
  r.options = spec_.given;
  return Status::OK();
}

// --read_iolog: load the trace and check that every I/O fits the device
// and its block size, so a bad trace fails the run before any I/O.
Status Job::prepare_replay() {
  if (spec_.verify != VerifyMode::none) return Status::invalid("--read_iolog and --verify exclude each other");
  auto t = load_blktrace(spec_.read_iolog, spec_.replay);
  if (!t) return t.status();
  replay_ = std::move(*t);
  const uint32_t lbs = q_.limits().logical_block_size;
  for (const ReplayIo& io : replay_.ios) {
    if (io.offset % lbs || io.len % lbs)
      return Status::invalid("read_iolog: an I/O at " + std::to_string(io.offset) + " (" + std::to_string(io.len) +
                             " bytes) is not aligned to the device's block size " + std::to_string(lbs) +
                             " (replay_align may fix it)");
    if (io.offset + io.len > dev_size_)
      return Status::invalid("read_iolog: an I/O at " + std::to_string(io.offset) + " (" + std::to_string(io.len) +
                             " bytes) is beyond the device size " + std::to_string(dev_size_) +
                             " (replay_scale may fix it)");
  }
  unit_bytes_ = replay_.max_len;
  return Status::OK();
}

uint64_t Job::planned_bytes() const {
  if (!replay_.ios.empty()) {
    uint64_t sum = 0;
    for (const ReplayIo& io : replay_.ios) sum += io.len;
    return sum;
  }
  const uint64_t pass = nblocks_ * spec_.bs;
  if (spec_.verify != VerifyMode::none) return rw_has_writes(spec_.rw) ? 2 * pass : pass;
  return spec_.time_based ? 0 : pass;
}

void Job::reset_generators() {
  map_ = RandomMap(nblocks_, seed_);
  rng_ = Xoshiro256(seed_);
  mix_rng_ = Xoshiro256(seed_ ^ 0x5bd1e995);
  seq_next_ = 0;
}

void Job::run() {
  tl_job = this;
  if (spec_.prioclass > 0) blkmq::current_io_context()->ioprio = ioprio_;
  // With cgroup=, cgroup_weight is the group's (io.bfq.weight), as fio
  // writes the cgroup's weight file; without, the thread's context weight.
  if (spec_.cgroup_weight > 0 && spec_.cgroup.empty())
    blkmq::current_io_context()->weight = static_cast<uint16_t>(spec_.cgroup_weight);
  join_cgroup();
  if (spec_.ramp_ns == 0 || spec_.verify != VerifyMode::none) begin_measure();
  if (spec_.verify == VerifyMode::none) {
    run_phase(Phase::normal);
  } else {
    if (rw_has_writes(spec_.rw)) run_phase(Phase::verify_write);
    if (!stopping_) run_phase(Phase::verify_read);
  }
  if (!measuring_) begin_measure();  // finished inside the ramp: nothing was measured
  const uint64_t end = now_ns();
  if (log_.enabled()) log_.finish(end);
  JobResult& r = *result_;
  r.runtime_ns = end - start_ns_;
  r.cpu_runtime_ns = r.runtime_ns;
  r.cpu = CpuUsage::thread_now() - cpu_start_;
  leave_cgroup();
  tl_job = nullptr;
  finished_.store(true, std::memory_order_release);
}

// fio's cgroup=: the thread's context joins /NAME, made if missing (the
// name was checked with the options, so only a removal racing this can
// fail, and then the job runs in the root group, said on stderr).
void Job::join_cgroup() {
  if (spec_.cgroup.empty()) return;
  auto g = blkmq::io_group_create("/" + spec_.cgroup);
  blkmq::Status st = g ? blkmq::io_context_set_group(blkmq::current_io_context(), *g) : g.status();
  // fio writes the cgroup's one weight file; here both policies' group
  // weights take it, so the job's weight holds under bfq and io.cost.
  if (st && spec_.cgroup_weight > 0) st = blkmq::io_group_set_bfq_weight(*g, spec_.cgroup_weight);
  if (st && spec_.cgroup_weight > 0) st = blkmq::io_group_set_cost_weight(*g, spec_.cgroup_weight);
  if (!st) std::fprintf(stderr, "%s: cgroup=%s: %s\n", spec_.name.c_str(), spec_.cgroup.c_str(), st.message().c_str());
}

// As fio at the end of a job: back to the root group, and the group goes
// unless cgroup_nodelete. With numjobs clones the last to leave removes
// it (the others find it still in use, EBUSY, which is not an error).
void Job::leave_cgroup() {
  if (spec_.cgroup.empty()) return;
  (void)blkmq::io_context_set_group(blkmq::current_io_context(), nullptr);  // to the root: cannot fail
  if (!spec_.cgroup_nodelete) (void)blkmq::io_group_remove("/" + spec_.cgroup);
}

void Job::begin_measure() {
  measuring_ = true;
  for (unsigned d = 0; d < 2; ++d) ramp_ios_[d] += result_->dir[d].ios;
  for (DirStats& d : result_->dir) d.clear();
  start_ns_ = now_ns();
  if (log_.enabled()) log_.reset(start_ns_);
  cpu_start_ = CpuUsage::thread_now();
}

inline void Job::check_ramp() {
  if (!measuring_ && ramp_over_.load(std::memory_order_relaxed)) begin_measure();
}

// One pass of the fio loop: fill the queue in batches, reap when full or
// when nothing is left to submit, drain at the end.
void Job::run_phase(Phase ph) {
  phase_ = ph;
  issued_ = 0;
  reset_generators();
  if (ph == Phase::verify_write) {
    mix_ = Mix::writes;
    target_ = nblocks_;
  } else if (ph == Phase::verify_read) {
    mix_ = Mix::reads;
    target_ = rw_has_writes(spec_.rw) ? verify_written_ : nblocks_;
  } else {
    mix_ = !rw_has_writes(spec_.rw) ? Mix::reads : !rw_has_reads(spec_.rw) ? Mix::writes : Mix::mixed;
    target_ = spec_.time_based ? UINT64_MAX : nblocks_;
  }
  if (!replay_.ios.empty()) {
    target_ = replay_.ios.size();
    replay_next_ = 0;
    replay_start_ns_ = now_ns();
  }
  // At the recorded pace each I/O waits for its moment: one at a time.
  const unsigned batch = !replay_.ios.empty() && !spec_.replay.no_stall ? 1u : spec_.iodepth_batch_submit;
  const unsigned depth = spec_.iodepth;
  for (;;) {
    reap_ready();
    check_ramp();
    // Verify phases run to the end of the region: a stopped write phase
    // would leave blocks unchecked.
    if (ph == Phase::normal && stop_.load(std::memory_order_relaxed)) stopping_ = true;
    if (!retry_.empty()) {
      resubmit_retries();
      continue;
    }
    bool more = !stopping_ && issued_ < target_;
    if (more && inflight_ < depth) {
      uint64_t left = target_ - issued_;
      unsigned n = std::min(batch, depth - inflight_);
      if (left < n) n = static_cast<unsigned>(left);
      submit_batch(n);
      continue;
    }
    if (inflight_ == 0) break;
    wait_completions(std::min(std::max(spec_.iodepth_batch_complete, 1u), inflight_));
  }
}

// The next I/O of the trace, at its recorded time after the replay began
// (scaled by replay_time_scale) unless replay_no_stall; completions that
// arrive meanwhile wait for the next reap, as fio's do while it stalls.
void Job::prep_replay(IoUnit* u) {
  const ReplayIo& io = replay_.ios[replay_next_++];
  if (!spec_.replay.no_stall) {
    const uint64_t due = replay_start_ns_ + io.time_ns;
    for (uint64_t now = now_ns(); now < due; now = now_ns())
      std::this_thread::sleep_for(std::chrono::nanoseconds(due - now));
  }
  u->offset = io.offset;
  fill_bio(u, io.write, io.len);
}

inline Job::Prep Job::prep(IoUnit* u) {
  if (!replay_.ios.empty()) {
    prep_replay(u);
    return Prep::ready;
  }
  bool write;
  switch (mix_) {
    case Mix::reads: write = false; break;
    case Mix::writes: write = true; break;
    default: write = mix_rng_.below(100) >= spec_.rwmixread; break;
  }
  uint64_t blk;
  if (!rw_is_random(spec_.rw)) {
    blk = seq_next_;
    if (++seq_next_ == nblocks_) seq_next_ = 0;
  } else if (spec_.norandommap && phase_ == Phase::normal) {
    blk = rng_.below(nblocks_);
  } else {
    blk = map_.next();
  }
  u->offset = base_ + blk * spec_.bs;
  if (zbd_) [[unlikely]]
    return zbd_adjust(u, write);
  fill_bio(u, write, spec_.bs);
  if (write && phase_ == Phase::verify_write) verify_fill(u->iov.iov_base, spec_.bs, u->offset, seed_);
  return Prep::ready;
}

inline void Job::fill_bio(IoUnit* u, bool write, uint32_t len) {
  u->ddir = write ? kWrite : kRead;
  u->inflight = true;
  blkmq::Bio& b = u->bio;
  blkmq::bio_reinit(&b);
  b.op = write ? blkmq::ReqOp::write : blkmq::ReqOp::read;
  // Direct writes are REQ_SYNC in the kernel too (O_DIRECT from io_uring/psync);
  // direct=0 writes are the page cache's writeback, not sync.
  b.flags = bio_flags_ | (write ? (spec_.writeback ? uint32_t{blkmq::kBioWriteback} : uint32_t{blkmq::kBioSync}) : 0u);
  b.ioprio = ioprio_;
  b.sector = u->offset >> blkmq::kSectorShift;
  b.size = len;
  u->iov.iov_len = len;
  b.vec = &u->iov;
  b.nr_vecs = 1;
  b.ioc = nullptr;
  b.end_io = &Job::end_io;
  b.private_data = u;
}

// Forced inline: the bench loop's own cost is part of every measured I/O.
[[gnu::always_inline]] inline void Job::submit_units(unsigned n) {
  if (n == 0) return;
  inflight_ += n;
  issued_ += n;
  uint64_t t0 = gtod_ ? now_ns() : 0;
  if (n > 2) {
    // As io_uring does: plug only batches of more than two.
    blkmq::Plug plug(n);
    for (unsigned i = 0; i < n; ++i) q_.submit_bio(&batch_[i]->bio);
  } else {
    for (unsigned i = 0; i < n; ++i) q_.submit_bio(&batch_[i]->bio);
  }
  if (gtod_) {
    // Completions of this batch are processed only by this thread, later,
    // so stamping after submission is safe even if they already ended.
    uint64_t t1 = now_ns();
    for (unsigned i = 0; i < n; ++i) {
      batch_[i]->start_ns = t0;
      batch_[i]->issue_ns = t1;
    }
  }
}

// Preps n units and submits them.
void Job::submit_batch(unsigned n) {
  if (zbd_) [[unlikely]] {
    submit_batch_zbd(n);
    return;
  }
  for (unsigned i = 0; i < n; ++i) {
    IoUnit* u = free_[--nfree_];
    prep(u);  // always ready without zones
    batch_[i] = u;
  }
  submit_units(n);
}

// zonemode=zbd may cut the batch short: a zone to reset first (what was
// prepped goes, the job waits for its I/O, resets, and goes on) or the end
// of what the zones can take. A writing job holds the device's order lock
// from placing its writes to submitting them.
void Job::submit_batch_zbd(unsigned n) {
  std::unique_lock<std::mutex> order;
  if (mix_ != Mix::reads) order = zbd_->order_writes();
  unsigned i = 0;
  while (i < n) {
    IoUnit* u = free_[--nfree_];
    const Prep p = prep(u);
    if (p == Prep::ready) {
      batch_[i++] = u;
      continue;
    }
    free_[nfree_++] = u;
    if (p == Prep::reset_zone) {
      submit_units(i);
      n -= i;
      i = 0;
      if (zbd_reset()) continue;
    }
    stopping_ = true;
    break;
  }
  submit_units(i);
}

// zonemode=zbd: the unit's offset moves to its zone's write pointer (a
// write) or below it (a read), and its length to the zone's end; a
// sequential job goes on from there, as fio's does.
Job::Prep Job::zbd_adjust(IoUnit* u, bool write) {
  uint32_t len = spec_.bs;
  switch (zbd_->adjust(write, &u->offset, &len, &zbd_reset_zone_)) {
    case ZbdJob::Adjust::reset_first: return Prep::reset_zone;
    case ZbdJob::Adjust::eof: return Prep::eof;
    case ZbdJob::Adjust::ok: break;
  }
  if (!rw_is_random(spec_.rw)) seq_next_ = ((u->offset - base_) / spec_.bs + len / spec_.bs) % nblocks_;
  fill_bio(u, write, len);
  if (write && phase_ == Phase::verify_write) verify_fill(u->iov.iov_base, len, u->offset, seed_);
  return Prep::ready;
}

// fio's io_u_quiesce and zone reset: everything in flight completes first,
// so no write of the zone is overtaken by its reset. False (with the error
// recorded) if the reset failed.
bool Job::zbd_reset() {
  if (inflight_) wait_completions(inflight_);
  if (Status st = zbd_->reset(zbd_reset_zone_); !st) {
    record_error(nullptr, st.code(), st.message());
    return false;
  }
  result_->zone_resets = zbd_->zone_resets();
  return true;
}

// zonemode=zbd: the device's zones (or emulated ones) and the job's region
// cut to whole zones, as fio's zbd_verify_sizes says on stderr.
Status Job::prepare_zbd(uint64_t* size) {
  if (!spec_.read_iolog.empty()) return Status::invalid("zonemode=zbd and read_iolog exclude each other");
  if (spec_.writeback && rw_has_writes(spec_.rw) && q_.limits().zoned)
    return Status::invalid("zonemode=zbd: writes to a host-managed zoned device need direct=1, as fio requires");
  auto dev = ZbdDevice::get(q_, spec_.zbd);
  if (!dev) return Status::invalid("zonemode=zbd: " + dev.status().message());
  std::string notes;
  auto j = ZbdJob::create(std::move(*dev), spec_.zbd, static_cast<int>(index_), &spec_.offset, size, spec_.bs,
                          rw_is_random(spec_.rw), spec_.randseed ^ (index_ + 1), &notes);
  if (!j) return Status::invalid("zonemode=zbd: " + j.status().message());
  if (!notes.empty()) std::fprintf(stderr, "%s: %s", spec_.name.c_str(), notes.c_str());
  zbd_ = std::move(*j);
  result_->zbd = true;
  return Status::OK();
}


void Job::end_io(blkmq::Bio* bio) {
  auto* u = static_cast<IoUnit*>(bio->private_data);
  Job* j = u->job;
  if (tl_job == j) {
    u->next = j->local_head_;
    j->local_head_ = u;
    return;
  }
  j->push_remote(u);
}

// Cross-thread completion: lock-free push, then a wake only if the job sleeps
// waiting for at least this many. Pairs with sleep_for_remote(): both sides
// use seq_cst so either the job sees the count or we see its wait_for_.
void Job::push_remote(IoUnit* u) {
  IoUnit* h = remote_head_.load(std::memory_order_relaxed);
  do {
    u->next = h;
  } while (!remote_head_.compare_exchange_weak(h, u, std::memory_order_release, std::memory_order_relaxed));
  const uint32_t n = remote_count_.fetch_add(1, std::memory_order_seq_cst) + 1;
  const uint32_t w = wait_for_.load(std::memory_order_seq_cst);
  if (w != 0 && n >= w) blkmq::wake_waiters(&remote_count_);
}

// Completions are time-stamped here, when the job reaps them, not in
// end_io: as fio does, one clock read per reaped batch. A bio completed
// inline during submit_batch then still gets clat = reap - issue > 0 and
// lat = slat + clat, and end_io costs no clock read.
unsigned Job::reap_ready() {
  IoUnit* l = local_head_;
  local_head_ = nullptr;
  IoUnit* r = nullptr;
  if (remote_head_.load(std::memory_order_relaxed) != nullptr)
    r = remote_head_.exchange(nullptr, std::memory_order_acquire);
  if (l == nullptr && r == nullptr) return 0;
  // After taking the lists: every unit reaped completed before this read.
  const uint64_t now = gtod_ ? now_ns() : 0;
  unsigned n = process_list(l, now);
  if (r != nullptr) {
    unsigned k = process_list(r, now);
    remote_count_.fetch_sub(k, std::memory_order_relaxed);
    n += k;
  }
  if (log_.enabled()) log_.tick(now);
  for (unsigned d = 0; d < 2; ++d)
    done_ios_[d].store(ramp_ios_[d] + result_->dir[d].ios, std::memory_order_relaxed);
  return n;
}

unsigned Job::process_list(IoUnit* u, uint64_t now) {
  unsigned n = 0;
  while (u != nullptr) {
    IoUnit* next = u->next;
    process(u, now);
    u = next;
    ++n;
  }
  return n;
}

inline void Job::process(IoUnit* u, uint64_t now) {
  if (u->bio.status == blkmq::BlkStatus::again && spec_.hipri) {
    retry_.push_back(u);
    return;
  }
  inflight_--;
  u->inflight = false;
  free_[nfree_++] = u;
  const blkmq::BlkStatus st = u->bio.status;
  if (st != blkmq::BlkStatus::ok) {
    char msg[128];
    std::snprintf(msg, sizeof msg, "%s at offset %" PRIu64 " (%u bytes) failed: %s", ddir_name(u->ddir), u->offset,
                  u->bio.size, blkmq::blk_status_name(st));
    record_error(u, -blkmq::blk_status_to_errno(st), msg);
    return;
  }
  if (phase_ != Phase::normal) {
    if (phase_ == Phase::verify_write) {
      verify_written_++;
    } else {
      std::string why;
      if (!verify_check(u->iov.iov_base, spec_.bs, u->offset, &why)) record_error(u, EILSEQ, why);
    }
  }
  DirStats& d = result_->dir[u->ddir];
  d.ios++;
  d.bytes += u->bio.size;
  if (gtod_) {
    // now >= issue_ns: a batch is stamped before this thread reaps any of it.
    const uint64_t clat = now - u->issue_ns;
    d.slat.add(u->issue_ns - u->start_ns);
    d.clat.add(clat);
    d.clat_hist.add(clat);
    d.lat.add(now - u->start_ns);
    if (log_.enabled()) log_.add(now, u->ddir, u->offset, u->issue_ns - u->start_ns, clat, now - u->start_ns);
  }
}

// Like fio's default (no continue_on_error): the first error stops new I/O;
// every error is counted, the first one is reported.
void Job::record_error(const IoUnit* u, int err, std::string msg) {
  JobResult& r = *result_;
  r.errors++;
  if (r.error == 0) {
    r.error = err != 0 ? err : EIO;
    r.error_msg = std::move(msg);
    std::fprintf(stderr, "blkmq bench: %s: %s\n", spec_.name.c_str(), r.error_msg.c_str());
  }
  stopping_ = true;
}

void Job::wait_completions(unsigned need) {
  unsigned got = reap_ready();
  while (got < need) {
    if (spec_.hipri) {
      poll_once();
    } else if (spec_.iodepth_batch_complete == 0) {
      cpu_relax();  // iodepth_batch_complete=0: busy-wait, never sleep
    } else {
      sleep_for_remote(need - got);
    }
    got += reap_ready();
  }
}

// Sleeps in the queue (Queue::wait), which with a uring device means in
// the ring: what completes there is ended by this thread (the local list),
// so the wait ends on a local completion too, not only on enough remote ones.
void Job::sleep_for_remote(unsigned need) {
  wait_for_.store(need, std::memory_order_seq_cst);
  for (;;) {
    const uint32_t n = remote_count_.load(std::memory_order_seq_cst);
    if (n >= need || local_head_ != nullptr) break;
    const blkmq::Bio* bio = inflight_bio();
    if (bio == nullptr) break;  // every unit ended: they are on a list
    q_.wait(bio, &remote_count_, n);
  }
  wait_for_.store(0, std::memory_order_relaxed);
}

// Some bio still in flight, taken round-robin so waits and polls visit the
// hctxs a job's bios went to (the job may have moved between CPUs).
const blkmq::Bio* Job::inflight_bio() {
  const unsigned depth = spec_.iodepth;
  for (unsigned i = 0; i < depth; ++i) {
    IoUnit& u = units_[poll_cursor_];
    poll_cursor_ = poll_cursor_ + 1 == depth ? 0 : poll_cursor_ + 1;
    if (u.inflight) return &u.bio;
  }
  return nullptr;
}

// hipri: poll the hctx of some bio still in flight; completions found run
// end_io on this thread (the local list).
void Job::poll_once() {
  if (const blkmq::Bio* bio = inflight_bio()) q_.poll(bio);
}

// Polls first, so that a bio refused for want of a tag goes again only
// after completions may have freed one (resubmitting at once would spin).
// Each keeps its submit time: its latency includes the wait.
void Job::resubmit_retries() {
  poll_once();
  retrying_.swap(retry_);  // what fails again goes back on retry_
  for (IoUnit* u : retrying_) {
    fill_bio(u, u->ddir == kWrite, static_cast<uint32_t>(u->iov.iov_len));
    q_.submit_bio(&u->bio);
  }
  retrying_.clear();
}

}  // namespace bench

// One io_uring per hw queue: preparing and submitting SQEs, the reaper
// thread that completes requests in hardirq context, short-transfer and
// -EAGAIN continuation, and reaping on poll queues.
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>

#include <unistd.h>

#include <cerrno>
#include <string>

#include "base/thread.h"
#include "blkmq/driver/context.h"
#include "drivers/file_io.h"
#include "drivers/uring/uring_dev.h"

namespace blkmq::uring {
namespace {

// user_data of the NOP that tells a reaper to exit; requests are never null.
constexpr uint64_t kStopToken = 0;
// -EAGAIN from a file is transient (io_uring retries most of it itself);
// -ECANCELED means the thread that submitted the request exited while the
// request waited in that thread's io-wq (io_uring cancels a task's io-wq
// work when the task exits). Both are resubmitted, by the thread that reaps
// them; give up after this many resubmissions rather than spin forever.
constexpr uint16_t kMaxRetries = 1000;
// SQPOLL kernel thread idle time before it sleeps (needs a wakeup then).
constexpr unsigned kSqThreadIdleMs = 50;

inline UringCmd* to_cmd(Request* rq) { return rq->pdu_as<UringCmd>(); }

// Drops `done` bytes from the front of the command's remaining iovecs.
void advance(UringCmd* cmd, uint32_t done) {
  cmd->offset += done;
  cmd->left -= done;
  cmd->first = static_cast<uint16_t>(iov_advance(cmd->iov, cmd->nr_iov, cmd->first, done));
}

}  // namespace

UringQueue::~UringQueue() {
  stop_reaper();
  if (ring_ready_) io_uring_queue_exit(&ring_);
  if (efd_ >= 0) close(efd_);
}

int UringQueue::start(bool poll_type) {
  poll_type_ = poll_type;
  const UringParams& p = dev_->params();
  io_uring_params up{};
  sqpoll_ = p.sqpoll;
  if (p.sqpoll) {
    up.flags |= IORING_SETUP_SQPOLL;
    up.sq_thread_idle = kSqThreadIdleMs;
  }
  if (poll_type && dev_->features().iopoll) up.flags |= IORING_SETUP_IOPOLL;
  // Room for every tag, the flush request and the reaper's stop NOP.
  const unsigned entries = p.hw_queue_depth + 2;
  // SUBMIT_ALL (5.18): one bad SQE must not leave the rest of a batch
  // behind in the SQ. Older kernels refuse the flag; go without it there.
  up.flags |= IORING_SETUP_SUBMIT_ALL;
  int r = io_uring_queue_init_params(entries, &ring_, &up);
  if (r == -EINVAL) {
    up.flags &= ~IORING_SETUP_SUBMIT_ALL;
    r = io_uring_queue_init_params(entries, &ring_, &up);
  }
  if (r < 0) return r;
  {
    std::lock_guard lk(sq_mu_);
    ring_ready_ = true;
    // Buffers registered with the device before this ring existed. If the
    // kernel refuses them here the ring does without: its I/O takes the
    // unregistered path, which works the same.
    const auto n = static_cast<unsigned>(fixed_.size());
    if (n && io_uring_register_buffers(&ring_, fixed_.data(), n) < 0) fixed_.clear();
  }
  if (p.fixed_files) {
    const int fd = dev_->fd();
    // A kernel or a limit that refuses it only costs the per-I/O fd lookup.
    fixed_file_ = io_uring_register_files(&ring_, &fd, 1) == 0;
  }
  if (!poll_type) {
    if (const int e = setup_reaper_notify(); e < 0) return e;
    base::ThreadOptions opts;
    opts.name = "uring-reap/" + std::to_string(idx_);
    reaper_ = base::start_thread(opts, [this] { reap_loop(); });
  }
  return 0;
}

bool UringQueue::prep_locked(Request* rq) {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (!sqe) {
    // Full of prepared entries: push them to the kernel and try again.
    submit_locked();
    sqe = io_uring_get_sqe(&ring_);
    if (!sqe) return false;
  }
  UringCmd* cmd = to_cmd(rq);
  const int fd = fixed_file_ ? 0 : dev_->fd();
  switch (rq->op) {
    case ReqOp::read:
    case ReqOp::write:
      prep_rw(sqe, rq, fd);
      break;
    case ReqOp::flush:
      io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC);
      break;
    case ReqOp::discard:
    case ReqOp::write_zeroes:
      io_uring_prep_fallocate(sqe, fd, falloc_mode(rq->op), static_cast<off_t>(cmd->offset), cmd->left);
      break;
    default:  // op_supported() refused the rest before this
      break;
  }
  if (fixed_file_) sqe->flags |= IOSQE_FIXED_FILE;
  if (const unsigned n = dev_->params().force_async; n && ++async_count_ >= n) {
    async_count_ = 0;
    sqe->flags |= IOSQE_ASYNC;
  }
  io_uring_sqe_set_data(sqe, rq);
  cmd->issued.fetch_add(1, std::memory_order_release);
  pending_++;
  return true;
}

// A transfer of one segment needs no iovec: the kernel then imports none
// (and keeps none for an async retry), as fio's engine does by default.
// Inside a registered buffer its pages are already pinned as well.
void UringQueue::prep_rw(io_uring_sqe* sqe, Request* rq, int fd) {
  UringCmd* cmd = to_cmd(rq);
  const iovec* iov = cmd->iov + cmd->first;
  const unsigned nr = cmd->nr_iov - cmd->first;
  const bool write = rq->op == ReqOp::write;
  const int idx = nr == 1 ? fixed_index(iov->iov_base, iov->iov_len) : -1;
  if (idx >= 0) {
    const unsigned len = static_cast<unsigned>(iov->iov_len);
    if (write)
      io_uring_prep_write_fixed(sqe, fd, iov->iov_base, len, cmd->offset, idx);
    else
      io_uring_prep_read_fixed(sqe, fd, iov->iov_base, len, cmd->offset, idx);
    counts_.fixed++;
  } else if (nr == 1 && dev_->features().nonvectored) {
    const unsigned len = static_cast<unsigned>(iov->iov_len);
    if (write)
      io_uring_prep_write(sqe, fd, iov->iov_base, len, cmd->offset);
    else
      io_uring_prep_read(sqe, fd, iov->iov_base, len, cmd->offset);
    counts_.nonvectored++;
  } else {
    if (write)
      io_uring_prep_writev(sqe, fd, iov, nr, cmd->offset);
    else
      io_uring_prep_readv(sqe, fd, iov, nr, cmd->offset);
    counts_.vectored++;
  }
  // FUA: the data is durable when the write completes.
  if (write && (rq->cmd_flags & kBioFua)) sqe->rw_flags = RWF_DSYNC;
  sqe->ioprio = forwarded_ioprio(rq->ioprio, dev_->features().rt_ioprio);
}

// Linear: a bench registers one region per job, a server one pool.
int UringQueue::fixed_index(const void* base, size_t len) const {
  const auto* p = static_cast<const char*>(base);
  for (size_t i = 0; i < fixed_.size(); ++i) {
    const auto* b = static_cast<const char*>(fixed_[i].iov_base);
    if (p >= b && len <= fixed_[i].iov_len && static_cast<size_t>(p - b) <= fixed_[i].iov_len - len)
      return static_cast<int>(i);
  }
  return -1;
}

int UringQueue::register_buffers(std::span<const iovec> regions) {
  std::lock_guard lk(sq_mu_);
  if (ring_ready_ && !fixed_.empty()) io_uring_unregister_buffers(&ring_);
  fixed_.assign(regions.begin(), regions.end());
  if (!ring_ready_ || fixed_.empty()) return 0;
  const int r = io_uring_register_buffers(&ring_, fixed_.data(), static_cast<unsigned>(fixed_.size()));
  if (r < 0) fixed_.clear();
  return r;
}

SqeCounts UringQueue::sqe_counts() {
  std::lock_guard lk(sq_mu_);
  return counts_;
}

void UringQueue::submit_locked() {
  if (!pending_) return;
  // On an error (-EAGAIN, -EBUSY: the kernel is short of memory or the CQ
  // is overflowing) the entries stay in the SQ; the reaper or the next
  // submission pushes them again.
  // Without SQPOLL whatever the kernel did not consume is still ours to
  // push; with SQPOLL its thread consumes the SQ on its own.
  if (io_uring_submit(&ring_) >= 0) pending_ = sqpoll_ ? 0 : io_uring_sq_ready(&ring_);
}

BlkStatus UringQueue::issue(Request* rq, bool last) {
  UringCmd* cmd = to_cmd(rq);
  cmd->offset = rq->sector << kSectorShift;
  cmd->left = rq->data_len;
  cmd->first = 0;
  cmd->nr_iov = 0;
  cmd->retries = 0;
  if (op_has_data(rq->op)) {
    bool too_many = false;
    rq_for_each_segment(rq, [&](void* base, size_t len, uint64_t) {
      if (cmd->nr_iov == kMaxSegments) {
        too_many = true;
        return;
      }
      cmd->iov[cmd->nr_iov++] = {base, len};
    });
    // The core honours max_segments; this only guards against a core bug.
    if (too_many) return BlkStatus::ioerr;
  }
  {
    std::lock_guard lk(sq_mu_);
    // The SQ is sized for every tag, so only SQPOLL (the kernel thread has
    // not caught up) can leave it full: requests are in flight then.
    if (!io_uring_sq_space_left(&ring_)) submit_locked();
    if (!io_uring_sq_space_left(&ring_)) return BlkStatus::dev_resource;
    start_request(rq);
    prep_locked(rq);
    if (!last) return BlkStatus::ok;
  }
  commit();
  return BlkStatus::ok;
}

// What the submit's task work posts on the way out of io_uring_enter is
// this thread's to reap (reap_ready), so the reaper is muted meanwhile.
void UringQueue::commit() {
  hold_cq();
  {
    std::lock_guard lk(sq_mu_);
    submit_locked();
  }
  reap_ready();
  release_cq();
}

// io_uring posts the CQE of a read or write from task work of the thread
// that submitted it, and a submitting thread runs its pending task work on
// its way out of io_uring_enter. So right after a submission the CQ often
// holds completions of this thread's earlier requests. Waiting for the
// reaper to notice them costs a wake-up of the reaper and, with rq_affinity,
// a hand-off back to this CPU; completing them here, as an interrupt that
// arrived while the CPU was submitting, costs neither. The reaper still
// takes whatever is left, so nothing waits on the next submission.
void UringQueue::reap_ready() {
  if (poll_type_) return;
  std::unique_lock lk(cq_mu_, std::try_to_lock);
  if (!lk.owns_lock()) return;  // the reaper is at it
  if (!io_uring_cq_ready(&ring_)) return;
  HardirqScope irq;
  bool stop;
  reap_locked(/*reaper=*/false, &stop);
}

unsigned UringQueue::reap_locked(bool reaper, bool* stop) {
  io_uring_cqe* cqes[kReapBatch];
  const unsigned n = io_uring_peek_batch_cqe(&ring_, cqes, kReapBatch);
  *stop = false;
  unsigned used = 0;
  // Ended together after the pass, as an interrupt handler's batch: the
  // clock, the CPU and the tag bitmap once for all (uring_complete only
  // ends the request, so skipping it for a batched one loses nothing).
  IoCompBatch iob;
  for (; used < n; used++) {
    const uint64_t data = cqes[used]->user_data;
    const int res = cqes[used]->res;
    if (data == kStopToken) {
      if (!reaper) break;
      *stop = true;
      continue;
    }
    if (consume_futex_cqe(data)) continue;
    auto* rq = reinterpret_cast<Request*>(data);
    (void)to_cmd(rq)->issued.load(std::memory_order_acquire);
    BlkStatus st;
    if (handle_result(rq, res, &st)) complete_request_batched(rq, st, &iob);
  }
  end_request_batch(&iob);
  io_uring_cq_advance(&ring_, used);
  return used;
}

void UringQueue::resubmit(Request* rq) {
  std::lock_guard lk(sq_mu_);
  // In-flight requests never outnumber the SQ entries, but with SQPOLL the
  // kernel thread may still hold the slots of entries it has not read.
  while (!prep_locked(rq)) io_uring_sqring_wait(&ring_);
  submit_locked();
}

bool UringQueue::handle_result(Request* rq, int res, BlkStatus* st) {
  UringCmd* cmd = to_cmd(rq);
  if ((res == -EAGAIN || res == -ECANCELED) && cmd->retries < kMaxRetries) {
    cmd->retries++;
    resubmit(rq);
    return false;
  }
  if (res < 0) {
    *st = errno_to_blk_status(res);
    return true;
  }
  if (!op_has_data(rq->op) || static_cast<uint32_t>(res) >= cmd->left) {
    *st = BlkStatus::ok;
    return true;
  }
  if (res == 0) {
    // End of file inside the device's capacity: the file shrank under us.
    *st = BlkStatus::ioerr;
    return true;
  }
  // A short transfer: continue from where it stopped.
  advance(cmd, static_cast<uint32_t>(res));
  resubmit(rq);
  return false;
}

void UringQueue::reap_loop() {
  for (;;) {
    bool stop = false;
    bool found = false;
    {
      // The CQ head is read and advanced only under cq_mu_, so submitters
      // reaping in reap_ready() and this thread never race on it.
      std::lock_guard lk(cq_mu_);
      if (io_uring_cq_ready(&ring_)) {
        found = true;
        HardirqScope irq;
        reap_locked(/*reaper=*/true, &stop);
      }
    }
    if (found) {
      std::lock_guard lk(sq_mu_);
      submit_locked();  // anything a failed submit left behind
    }
    if (stop) return;
    if (found) continue;
    reaper_sleep();
  }
}

void UringQueue::stop_reaper() {
  if (!reaper_.joinable()) return;
  {
    std::lock_guard lk(sq_mu_);
    io_uring_sqe* sqe;
    while (!(sqe = io_uring_get_sqe(&ring_))) {
      submit_locked();
      io_uring_sqring_wait(&ring_);
    }
    io_uring_prep_nop(sqe);
    io_uring_sqe_set_data64(sqe, kStopToken);
    pending_++;
    while (pending_) submit_locked();
  }
  reaper_.join();
}

int UringQueue::poll(IoCompBatch* iob) {
  std::unique_lock lk(cq_mu_, std::try_to_lock);
  // Another poller is reaping this ring; what it finds it ends.
  if (!lk.owns_lock()) return 0;
  // IOPOLL rings complete only inside io_uring_enter.
  if (dev_->features().iopoll) io_uring_get_events(&ring_);
  io_uring_cqe* cqes[kReapBatch];
  const unsigned n = io_uring_peek_batch_cqe(&ring_, cqes, kReapBatch);
  int found = 0;
  for (unsigned i = 0; i < n; i++) {
    auto* rq = reinterpret_cast<Request*>(cqes[i]->user_data);
    const int res = cqes[i]->res;
    (void)to_cmd(rq)->issued.load(std::memory_order_acquire);
    BlkStatus st;
    if (!handle_result(rq, res, &st)) continue;
    if (!iob || !add_to_batch(rq, iob, st)) end_request(rq, st);
    found++;
  }
  io_uring_cq_advance(&ring_, n);
  commit();  // resubmissions of short transfers
  return found;
}

}  // namespace blkmq::uring

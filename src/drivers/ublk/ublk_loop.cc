// The built-in loop target: a file through io_uring, one ring per server
// thread, with the server sleeping in the ring itself. An armed read of the
// server's wake eventfd makes "a request arrived" one more CQE, so the
// server waits for new requests and for file I/O in one system call. A
// short read or write continues where it stopped, as the uring driver's
// does, so a write that runs out of space ends with the -ENOSPC of its
// continuation (nospc), not as a short transfer (ioerr).
#include <fcntl.h>
#include <liburing.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "drivers/file_io.h"
#include "drivers/ublk/ublk_dev.h"
#include "drivers/ublk/ublk_targets.h"

namespace blkmq::ublkd {
namespace {

// One I/O on the ring: the iovec array io_uring reads from until the CQE,
// and for a read or write where it stands (a short transfer continues).
struct Slot {
  UblkIo* io = nullptr;
  std::vector<iovec> iov;
  unsigned first = 0;   // iov[first] is where the next transfer starts
  uint64_t offset = 0;  // file offset of the next transfer
  uint32_t left = 0;    // bytes still to move
};

// Server-thread-private state of one queue: nothing here is shared.
struct LoopQueue {
  io_uring ring{};
  bool ring_ok = false;
  bool wake_armed = false;   // a read of the wake eventfd is on the ring
  uint64_t wake_buf = 0;
  std::vector<std::unique_ptr<Slot>> slots;
  std::vector<Slot*> free_slots;
  unsigned unsubmitted = 0;

  Slot* get_slot() {
    if (free_slots.empty()) {
      // Beyond the queue depth only with a flush request in flight: rare,
      // and the slot stays in the pool afterwards.
      slots.push_back(std::make_unique<Slot>());
      return slots.back().get();
    }
    Slot* s = free_slots.back();
    free_slots.pop_back();
    return s;
  }

  io_uring_sqe* get_sqe() {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    if (!sqe) {
      // The SQ is sized to the depth; flush it and try again.
      io_uring_submit(&ring);
      unsubmitted = 0;
      sqe = io_uring_get_sqe(&ring);
    }
    if (sqe) unsubmitted++;
    return sqe;
  }
};

class LoopTarget final : public UblkTarget, public ServerHooks {
 public:
  LoopTarget(int fd, unsigned nr_queues, unsigned depth) : fd_(fd), depth_(depth), queues_(nr_queues) {}
  ~LoopTarget() override { close(fd_); }

  Status init_queue(unsigned q) override;
  void exit_queue(unsigned q) override;
  void handle(UblkIo& io) override;
  void after_batch(unsigned q) override;
  void wait(unsigned q, int wake_fd) override;

 private:
  void prep(LoopQueue& lq, io_uring_sqe* sqe, Slot* s, UblkIo& io);
  void prep_rw(io_uring_sqe* sqe, Slot* s);
  bool continue_short(LoopQueue& lq, Slot* s, uint32_t done);
  void reap(LoopQueue& lq);
  void finish(LoopQueue& lq, Slot* s, int res);

  int fd_;
  unsigned depth_;
  // Sized at construction; element q is only touched by server q.
  std::vector<std::unique_ptr<LoopQueue>> queues_;
};

Status LoopTarget::init_queue(unsigned q) {
  if (q >= queues_.size()) return Status::invalid("ublk loop: queue index out of range");
  auto lq = std::make_unique<LoopQueue>();
  // Room for every request of the queue plus the wake read.
  int r = io_uring_queue_init(depth_ + 2, &lq->ring, 0);
  if (r < 0)
    return Status::error(-r, std::string("ublk loop: io_uring_queue_init: ") + strerror(-r) +
                                 " (io_uring unavailable?)");
  lq->ring_ok = true;
  for (unsigned i = 0; i < depth_; i++) lq->slots.push_back(std::make_unique<Slot>());
  for (auto& s : lq->slots) lq->free_slots.push_back(s.get());
  queues_[q] = std::move(lq);
  return Status::OK();
}

void LoopTarget::exit_queue(unsigned q) {
  // Every request completed before the servers stop; only the wake read can
  // still be on the ring, and tearing the ring down cancels it.
  if (queues_[q] && queues_[q]->ring_ok) io_uring_queue_exit(&queues_[q]->ring);
  queues_[q].reset();
}

// The readv or writev of what is left of s's transfer.
void LoopTarget::prep_rw(io_uring_sqe* sqe, Slot* s) {
  iovec* iov = s->iov.data() + s->first;
  const unsigned n = static_cast<unsigned>(s->iov.size()) - s->first;
  if (s->io->op() == ReqOp::read) {
    io_uring_prep_readv(sqe, fd_, iov, n, s->offset);
  } else {
    io_uring_prep_writev(sqe, fd_, iov, n, s->offset);
    if (s->io->fua()) sqe->rw_flags = RWF_DSYNC;
  }
  io_uring_sqe_set_data(sqe, s);
}

void LoopTarget::prep(LoopQueue& lq, io_uring_sqe* sqe, Slot* s, UblkIo& io) {
  switch (io.op()) {
    case ReqOp::read:
    case ReqOp::write:
      s->iov.clear();
      io.for_each_segment([s](void* base, size_t len, uint64_t) { s->iov.push_back({base, len}); });
      s->first = 0;
      s->offset = io.offset();
      s->left = io.length();
      prep_rw(sqe, s);
      return;
    case ReqOp::flush:
      io_uring_prep_fsync(sqe, fd_, IORING_FSYNC_DATASYNC);
      break;
    case ReqOp::discard:
    case ReqOp::write_zeroes:
      // Discard punches; write-zeroes keeps the blocks (file_io.h says why).
      io_uring_prep_fallocate(sqe, fd_, falloc_mode(io.op()), io.offset(), io.length());
      break;
    default:  // refused in handle()
      break;
  }
  io_uring_sqe_set_data(sqe, s);
}

// After `done` of s's bytes moved: queues the rest on the ring (submitted
// with the next batch or wait). False when no SQE is free (cannot happen:
// the ring has room for every slot).
bool LoopTarget::continue_short(LoopQueue& lq, Slot* s, uint32_t done) {
  io_uring_sqe* sqe = lq.get_sqe();
  if (!sqe) return false;
  s->first = iov_advance(s->iov.data(), static_cast<unsigned>(s->iov.size()), s->first, done);
  s->offset += done;
  s->left -= done;
  prep_rw(sqe, s);
  return true;
}

void LoopTarget::handle(UblkIo& io) {
  LoopQueue& lq = *queues_[io.queue()];
  // A file has no zones: the loop target's device is never zoned, so the
  // core refuses zone operations before they come here.
  if (io.op() > ReqOp::write_zeroes) {
    io.complete(BlkStatus::notsupp);
    return;
  }
  // The core normally turns a preflush into a flush request of its own;
  // should one arrive combined, flush first, synchronously (rare).
  if (io.preflush() && fdatasync(fd_) != 0) {
    io.complete(errno_to_blk_status(-errno));
    return;
  }
  io_uring_sqe* sqe = lq.get_sqe();
  if (!sqe) {
    io.complete(BlkStatus::ioerr);
    return;
  }
  Slot* s = lq.get_slot();
  s->io = &io;
  prep(lq, sqe, s, io);
}

void LoopTarget::finish(LoopQueue& lq, Slot* s, int res) {
  UblkIo* io = s->io;
  const bool data = op_has_data(io->op());
  // A short read or write goes on from where it stopped; its next CQE
  // says how that went (-ENOSPC for a write that filled the file system).
  if (data && res > 0 && static_cast<uint32_t>(res) < s->left &&
      continue_short(lq, s, static_cast<uint32_t>(res)))
    return;
  s->io = nullptr;
  lq.free_slots.push_back(s);
  if (res < 0) {
    io->complete(errno_to_blk_status(res), 0);
  } else if (data && static_cast<uint32_t>(res) < s->left) {
    // Nothing more moved (end of file: it shrank under the device): what
    // did goes through UblkIo's short-transfer rule, the rest ends ioerr.
    io->complete(BlkStatus::ok, io->length() - s->left + static_cast<uint32_t>(res));
  } else {
    io->complete(BlkStatus::ok);
  }
}

void LoopTarget::reap(LoopQueue& lq) {
  io_uring_cqe* cqe;
  while (io_uring_peek_cqe(&lq.ring, &cqe) == 0) {
    auto* s = static_cast<Slot*>(io_uring_cqe_get_data(cqe));
    const int res = cqe->res;
    io_uring_cqe_seen(&lq.ring, cqe);
    if (!s) {
      lq.wake_armed = false;  // the wake read fired (or was cancelled)
      continue;
    }
    finish(lq, s, res);
  }
}

void LoopTarget::after_batch(unsigned q) {
  LoopQueue& lq = *queues_[q];
  if (lq.unsubmitted) {
    io_uring_submit(&lq.ring);
    lq.unsubmitted = 0;
  }
  reap(lq);
}

void LoopTarget::wait(unsigned q, int wake_fd) {
  LoopQueue& lq = *queues_[q];
  if (!lq.wake_armed) {
    io_uring_sqe* sqe = lq.get_sqe();
    if (sqe) {
      io_uring_prep_read(sqe, wake_fd, &lq.wake_buf, sizeof(lq.wake_buf), 0);
      io_uring_sqe_set_data(sqe, nullptr);
      lq.wake_armed = true;
    }
  }
  // -EINTR and friends just send the server round its loop again.
  io_uring_submit_and_wait(&lq.ring, 1);
  lq.unsubmitted = 0;
  reap(lq);
}

}  // namespace

Result<std::unique_ptr<UblkTarget>> make_loop_target(const std::string& filename, bool direct, unsigned nr_queues,
                                                     unsigned depth, uint32_t bs, uint64_t* size_bytes) {
  int fd = open(filename.c_str(), O_RDWR | O_CLOEXEC | (direct ? O_DIRECT : 0));
  if (fd < 0)
    return Status::error(errno, "ublk loop: cannot open '" + filename + "': " + strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return Status::invalid("ublk loop: '" + filename + "' is not a regular file");
  }
  *size_bytes = static_cast<uint64_t>(st.st_size) / bs * bs;
  if (*size_bytes == 0) {
    close(fd);
    return Status::invalid("ublk loop: '" + filename + "' is smaller than one block (" +
                           std::to_string(bs) + " bytes)");
  }
  return std::unique_ptr<UblkTarget>(std::make_unique<LoopTarget>(fd, nr_queues, depth));
}

}  // namespace blkmq::ublkd

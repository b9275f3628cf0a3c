// Completions delivered to the thread that waits for them (Queue::wait).
//
// io_uring posts the CQE of a read or write from task work of the thread
// that submitted it. With a reaper thread waiting on the CQ, a completion
// takes three hops: the submitter is interrupted to post it, the reaper
// wakes to end the request, the submitter wakes again for its bio. A
// submitter that sleeps in the ring instead (io_uring_enter GETEVENTS) runs
// that task work inside its own wait, sees the CQE, and ends the request
// itself: one wake-up, as fio's io_uring engine has.
//
// One thread at a time sleeps in the ring, and it holds cq_mu_ while it
// does: io_uring's wait ends when the CQ tail passes the head as the
// sleeper found it, so a CQE meant to wake it (its read's, or its armed
// futex wait's) that another thread reaped just before the sleep began
// would leave it asleep with nothing left to wake it (seen under TSan:
// UringWait.ArmReapedElsewhereBeforeTheSleepDoesNotLoseTheWake). With the
// lock held no one else reaps, so whatever was posted stays in the CQ until
// the sleeper looks. Other waiters find the lock taken and sleep on their
// word instead; the sleeper (which wakes on every CQE) or the reaper ends
// their I/O.
//
// Two things make that safe for every other user of the ring:
// - Wakes that do not come from this ring (the bio completed on another
//   ring or thread, a timeout, a requeue) reach the sleeper through an
//   IORING_OP_FUTEX_WAIT on its thread's wake channel (see core/wait.cc),
//   armed once and left armed across waits; its CQE only clears the armed
//   flag.
// - The reaper sleeps on an eventfd registered with the ring, not on the
//   CQ, so a thread that will look at the CQ itself mutes it
//   (IORING_CQ_EVENTFD_DISABLED) and the kernel wakes no one else. The last
//   such thread unmutes it and reaps what came in meanwhile.
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>
#include <vector>

#include "blkmq/driver/context.h"
#include "drivers/uring/uring_dev.h"

namespace blkmq::uring {
namespace {

// Not in the headers of the liburing this builds against (2.3); stable
// kernel ABI since 6.7, and probed before use.
constexpr uint8_t kOpFutexWait = 51;
constexpr uint32_t kFutex2SizeU32 = 0x02;
constexpr uint32_t kFutex2Private = 128;
constexpr uint64_t kFutexMatchAny = 0xffffffffu;

// The reaper's backstop when the eventfd stays quiet: unmuting and the
// kernel's post of a CQE race (its check of the mute flag is not ordered
// with its store of the CQ tail), so a CQE posted in that window may wake
// no one. The reaper looks at the CQ this often anyway.
constexpr int kReaperBackstopMs = 50;

// An armed futex wait of one thread's channel in one ring. The CQE's user_data points
// here (tagged), so an entry outlives its thread: entries go back to a pool
// and are never freed. A stale CQE that clears a reused entry's flag only
// makes its new owner arm once more than needed.
struct alignas(8) FutexArm {
  std::atomic<bool> armed{false};
  uint64_t ring_id = 0;
};
constexpr uint64_t kFutexTag = 1;  // requests are aligned pointers, the stop token 0

std::mutex g_arm_mu;
// Never destroyed: the arms it holds must stay reachable (and valid) after
// static destructors ran, for CQEs that may still name them.
std::vector<FutexArm*>& g_arm_pool = *new std::vector<FutexArm*>;
std::atomic<uint64_t> g_next_ring_id{1};

// The calling thread's arms, one per ring it waits in; a few.
class ThreadArms {
 public:
  ~ThreadArms() {
    std::lock_guard lk(g_arm_mu);
    for (FutexArm* a : arms_) g_arm_pool.push_back(a);
  }
  FutexArm* get(uint64_t ring_id) {
    for (FutexArm* a : arms_)
      if (a->ring_id == ring_id) return a;
    FutexArm* a = nullptr;
    if (arms_.size() >= kMax) {
      a = arms_.front();  // the oldest; its pending wait, if any, stays harmless
      arms_.erase(arms_.begin());
    } else {
      std::lock_guard lk(g_arm_mu);
      if (!g_arm_pool.empty()) {
        a = g_arm_pool.back();
        g_arm_pool.pop_back();
      }
    }
    if (!a) a = new FutexArm;  // pooled, never freed (see FutexArm)
    a->armed.store(false, std::memory_order_relaxed);
    a->ring_id = ring_id;
    arms_.push_back(a);
    return a;
  }

 private:
  static constexpr size_t kMax = 8;
  std::vector<FutexArm*> arms_;
};

thread_local ThreadArms tl_arms;

// Whether the CQ holds entries, read without cq_mu_: io_uring_cq_ready
// reads the head with a plain load, which races with a reaper advancing it.
bool cq_has_entries(const io_uring* ring) {
  return __atomic_load_n(ring->cq.ktail, __ATOMIC_ACQUIRE) != __atomic_load_n(ring->cq.khead, __ATOMIC_RELAXED);
}

}  // namespace

uint64_t next_ring_id() { return g_next_ring_id.fetch_add(1, std::memory_order_relaxed); }

bool consume_futex_cqe(uint64_t user_data) {
  if (!(user_data & kFutexTag)) return false;
  reinterpret_cast<FutexArm*>(user_data & ~kFutexTag)->armed.store(false, std::memory_order_release);
  return true;
}

bool probe_futex_wait(io_uring* ring) {
  io_uring_probe* p = io_uring_get_probe_ring(ring);
  if (!p) return false;
  const bool ok = io_uring_opcode_supported(p, kOpFutexWait);
  io_uring_free_probe(p);
  return ok;
}

int UringQueue::setup_reaper_notify() {
  efd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (efd_ < 0) return -errno;
  if (const int r = io_uring_register_eventfd(&ring_, efd_); r < 0) return r;
  ring_id_ = next_ring_id();
  futex_op_ = dev_->params().waiter_reaps && probe_futex_wait(&ring_);
  return 0;
}

void UringQueue::set_reaper_notify(bool on) {
  if (efd_ < 0 || !ring_.cq.kflags) return;
  // The only flag user space may set in cq.kflags; a whole-word store keeps
  // racing holders from mixing halves of a read-modify-write.
  __atomic_store_n(ring_.cq.kflags, on ? 0u : unsigned{IORING_CQ_EVENTFD_DISABLED}, __ATOMIC_SEQ_CST);
}

void UringQueue::hold_cq() {
  if (poll_type_) return;
  // The holder count's RMWs pair with each other (release_cq's decrement):
  // only the first holder mutes and only the last unmutes, which takes the
  // RMW's atomicity; acq_rel orders each mute or unmute after the count
  // that decided it.
  if (cq_holders_.fetch_add(1, std::memory_order_acq_rel) == 0) set_reaper_notify(false);
}

void UringQueue::release_cq() {
  if (poll_type_) return;
  if (cq_holders_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;  // see hold_cq
  set_reaper_notify(true);
  // The eventfd unmuted before the CQ is read. Pairs with the kernel's
  // io_uring, which publishes a CQE's tail before it reads cq.kflags to
  // decide on the eventfd signal (io_eventfd_signal): either it signals
  // the reaper, or this read sees the CQE.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  // Posted while muted: reap it here, or have the reaper do it when another
  // thread holds the CQ lock (it may have looked already).
  if (cq_has_entries(&ring_) && !try_reap_all()) {
    const uint64_t one = 1;
    (void)!write(efd_, &one, sizeof one);
  }
}

bool UringQueue::try_reap_all() {
  std::unique_lock lk(cq_mu_, std::try_to_lock);
  if (!lk.owns_lock()) return false;
  HardirqScope irq;
  // A short batch: the CQ was empty, or only the reaper's stop token is left.
  bool stop;
  while (reap_locked(/*reaper=*/false, &stop) == kReapBatch) {
  }
  return true;
}

void UringQueue::reaper_sleep() {
  pollfd p{efd_, POLLIN, 0};
  if (::poll(&p, 1, kReaperBackstopMs) > 0) {
    uint64_t v;
    (void)!read(efd_, &v, sizeof v);
  }
}

int UringQueue::wait(const std::atomic<uint32_t>* word, uint32_t val, std::atomic<uint32_t>* channel,
                     uint32_t channel_val) {
  if (poll_type_ || !futex_op_) return -EOPNOTSUPP;
  // Another thread sleeps in the ring or reaps it: the core sleeps on the
  // word, and that thread (or the reaper after it) ends our I/O.
  std::unique_lock lk(cq_mu_, std::try_to_lock);
  if (!lk.owns_lock()) return -EAGAIN;
  FutexArm* a = tl_arms.get(ring_id_);
  hold_cq();
  // Exact under cq_mu_: only a reaper, which holds it, clears the flag, so
  // true means the futex wait is queued or its CQE is (or will be) posted.
  bool armed = a->armed.load(std::memory_order_acquire);
  if (!armed) {
    std::lock_guard sq(sq_mu_);
    if (io_uring_sqe* sqe = io_uring_get_sqe(&ring_)) {
      io_uring_prep_rw(kOpFutexWait, sqe, static_cast<int>(kFutex2SizeU32 | kFutex2Private), channel, 0,
                       channel_val);
      sqe->addr3 = kFutexMatchAny;
      io_uring_sqe_set_data64(sqe, reinterpret_cast<uint64_t>(a) | kFutexTag);
      a->armed.store(true, std::memory_order_relaxed);
      pending_++;
      submit_locked();
      armed = true;
    }
  }
  // Last looks before sleeping in the ring. They pair with the waker's
  // side: the caller's store to the word, then core wait.cc:wake_waiters'
  // increment of the channel. A wake after these reads changes the channel
  // the futex wait queued above waits on, so it completes.
  if (armed && !io_uring_cq_ready(&ring_) && word->load(std::memory_order_seq_cst) == val &&
      channel->load(std::memory_order_seq_cst) == channel_val)
    io_uring_enter(ring_.ring_fd, 0, 1, IORING_ENTER_GETEVENTS, nullptr);
  {
    HardirqScope irq;
    bool stop;
    while (reap_locked(/*reaper=*/false, &stop) == kReapBatch) {
    }
  }
  lk.unlock();
  release_cq();
  // No SQE for the futex wait (SQPOLL's thread is behind): the core sleeps
  // on the word instead, and the reaper completes.
  return armed ? 0 : -EAGAIN;
}

}  // namespace blkmq::uring

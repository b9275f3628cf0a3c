// Queue::wait on the uring driver: a thread that waits for its own I/O
// sleeps in the ring and completes it there (no reaper hop), a wake on the
// wait word reaches a thread asleep in the ring, the reaper still serves
// submitters that never wait, and arms left in a ring that is torn down
// harm no later device.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <climits>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "blkmq/blkmq.h"
#include "drivers/uring/uring_dev.h"
#include "support/device_test_util.h"
#include "support/wait.h"
#include "support/watchdog.h"

namespace blkmq {
namespace {

using devtest::AlignedBuf;

constexpr uint32_t kBlock = 4096;
constexpr uint64_t kFileSize = 4 << 20;

// One read whose end_io bumps the submitter's wait word and wakes it, as
// blkmq bench's jobs do, and records which thread ended it.
struct WaitIo {
  Bio bio;
  iovec iov{};
  std::atomic<uint32_t>* word = nullptr;
  std::atomic<int> ends{0};
  char ended_on[32] = {};

  void prep(uint64_t off, unsigned char* buf, std::atomic<uint32_t>* w) {
    bio = devtest::bio_at(ReqOp::read, off, kBlock);
    iov = {buf, kBlock};
    bio.vec = &iov;
    bio.nr_vecs = 1;
    bio.private_data = this;
    bio.end_io = [](Bio* b) {
      auto* io = static_cast<WaitIo*>(b->private_data);
      // The waiter may reuse `io` once `ends` moves: touch only the word after.
      std::atomic<uint32_t>* w = io->word;
      pthread_getname_np(pthread_self(), io->ended_on, sizeof io->ended_on);
      io->ends.fetch_add(1, std::memory_order_release);
      w->fetch_add(1, std::memory_order_seq_cst);
      wake_waiters(w);
    };
    word = w;
  }
};

// Waits the way a submitter does: re-check, then sleep on the word.
void wait_ended(Queue& q, WaitIo& io) {
  for (;;) {
    const uint32_t v = io.word->load(std::memory_order_seq_cst);
    if (io.ends.load(std::memory_order_acquire) != 0) return;
    q.wait(&io.bio, io.word, v);
  }
}

// A file of kFileSize on the root file system (not a tmpfs: O_DIRECT
// reads there complete from the device's interrupt, later than the submit).
class UringWait : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!devtest::direct_io_works(dir_.path())) GTEST_SKIP() << "no O_DIRECT under " << dir_.path();
    path_ = dir_.file("data");
    const int fd = open(path_.c_str(), O_RDWR | O_CREAT, 0644);
    ASSERT_GE(fd, 0);
    std::vector<unsigned char> buf(kFileSize, 0x5a);
    ASSERT_EQ(pwrite(fd, buf.data(), buf.size(), 0), static_cast<ssize_t>(buf.size()));
    fsync(fd);
    close(fd);
  }
  std::unique_ptr<Device> make(const char* waiter_reaps = "1") {
    return devtest::make_device("uring", {{"filename", path_}, {"direct", "1"}, {"waiter_reaps", waiter_reaps}});
  }
  // Whether this kernel has io_uring's futex wait (6.7): without it
  // Queue::wait is a plain futex wait and the reaper completes.
  static bool futex_op() {
    io_uring ring{};
    if (io_uring_queue_init(2, &ring, 0) != 0) return false;
    const bool ok = uring::probe_futex_wait(&ring);
    io_uring_queue_exit(&ring);
    return ok;
  }
  devtest::TempDir dir_{"blkmq-uring-wait"};
  std::string path_;
};

constexpr int kReads = 200;

// kReads random reads, one at a time, each waited for with Queue::wait;
// returns how many of them the reaper thread ended.
int reads_ended_by_reaper(Device& dev) {
  AlignedBuf buf(kBlock);
  std::atomic<uint32_t> word{0};
  int by_reaper = 0;
  std::mt19937 rng(1);
  for (int i = 0; i < kReads; i++) {
    WaitIo io;
    io.prep(uint64_t{rng() % (kFileSize / kBlock)} * kBlock, buf.data, &word);
    dev.queue().submit_bio(&io.bio);
    wait_ended(dev.queue(), io);
    EXPECT_EQ(io.bio.status, BlkStatus::ok);
    EXPECT_EQ(io.ends.load(), 1);
    if (std::strncmp(io.ended_on, "uring-reap", 10) == 0) by_reaper++;
  }
  return by_reaper;
}

// A read waited for with Queue::wait ends on the thread that waits, not on
// the reaper: the waiter slept in the ring, where the completion arrived.
TEST_F(UringWait, WaiterEndsItsOwnReads) {
  if (!futex_op()) GTEST_SKIP() << "no IORING_OP_FUTEX_WAIT";
  auto dev = make();
  ASSERT_TRUE(dev);
  test::Watchdog dog("WaiterEndsItsOwnReads", std::chrono::seconds(60));
  // The reaper may catch one in the short windows when no thread holds
  // the CQ; the waiter must end nearly all of them.
  EXPECT_LE(reads_ended_by_reaper(*dev), kReads / 10);
}

// The same loop with waiter_reaps=0: the reaper ends the reads (and the
// waiter sleeps on the word), so the test above tells the two apart.
TEST_F(UringWait, WithoutWaiterReapsTheReaperEndsThem) {
  auto dev = make("0");
  ASSERT_TRUE(dev);
  test::Watchdog dog("WithoutWaiterReaps", std::chrono::seconds(60));
  EXPECT_GT(reads_ended_by_reaper(*dev), 0);
}

// A thread asleep in the ring with nothing in flight wakes on a plain
// wake of its word (the armed futex wait), as a submitter whose bio ends
// on another thread must.
void expect_remote_wake(Device& dev) {
  AlignedBuf buf(kBlock);
  std::atomic<uint32_t> word{0};
  WaitIo io;
  io.prep(0, buf.data, &word);
  dev.queue().submit_bio(&io.bio);
  wait_ended(dev.queue(), io);
  const uint32_t v = word.load();
  std::atomic<bool> back{false};
  std::atomic<pid_t> tid{0};
  std::thread sleeper([&] {
    tid = test::this_tid();
    while (word.load() == v) dev.queue().wait(&io.bio, &word, v);
    back.store(true);
  });
  EXPECT_TRUE(test::eventually([&] { return tid.load() && test::asleep_in(tid.load(), SYS_io_uring_enter); }))
      << "the waiter never slept in its ring";
  EXPECT_FALSE(back.load()) << "Queue::wait returned with nothing to wake it";
  word.fetch_add(1);
  wake_waiters(&word);
  EXPECT_TRUE(test::eventually([&] { return back.load(); }, 5000))
      << "a wake of the word did not reach the thread asleep in the ring";
  if (!back.load()) {
    // Unstick it with a completion in its ring, so the test ends.
    WaitIo kick;
    std::atomic<uint32_t> w2{0};
    kick.prep(kBlock, buf.data, &w2);
    dev.queue().submit_bio(&kick.bio);
    wait_ended(dev.queue(), kick);
  }
  sleeper.join();
}

TEST_F(UringWait, WakeOfTheWordReachesAThreadAsleepInTheRing) {
  auto dev = make();
  ASSERT_TRUE(dev);
  test::Watchdog dog("RemoteWake", std::chrono::seconds(60));
  expect_remote_wake(*dev);
}

// The futex wait armed in a ring stays behind when the device goes; a new
// device (a new ring, maybe at the same address) must not take it for its own.
TEST_F(UringWait, ArmsOfATornDownRingAreNotReused) {
  test::Watchdog dog("ArmsOfATornDownRing", std::chrono::seconds(60));
  for (int round = 0; round < 3; round++) {
    auto dev = make();
    ASSERT_TRUE(dev);
    expect_remote_wake(*dev);
  }
}

// Leaves the calling thread's futex wait armed in `dev`'s ring with
// nothing to fire it: the thread sleeps in the ring on `word` (through
// `cookie`, a bio that ran on the ring) and a read another thread submits
// meanwhile, whose end_io wakes some other word, ends the sleep with its
// CQE. The read comes only once the thread is asleep in the ring: one
// that ended earlier (the reaper may take it) would leave the thread
// asleep for good. False when the thread did not sleep in the ring (the
// reaper held the CQ lock, so the core slept on `word` instead) and had
// to be woken through `word`, which fires the arm.
bool leave_stale_arm(Device& dev, const Bio* cookie, std::atomic<uint32_t>& word, unsigned char* buf) {
  const pid_t me = test::this_tid();
  const uint32_t v = word.load();
  std::atomic<uint32_t> other{0};
  WaitIo io;
  io.prep(kBlock, buf, &other);
  std::atomic<bool> back{false}, woken{false};
  std::thread helper([&] {
    if (!test::eventually([&] { return test::asleep_in(me, SYS_io_uring_enter); }, 2000)) {
      woken = true;  // asleep on the word, or not asleep: a wake of the word ends it
      word.fetch_add(1);
      wake_waiters(&word);
    }
    dev.queue().submit_bio(&io.bio);
    if (!test::eventually([&] { return back.load(); }, 5000)) {
      woken = true;
      word.fetch_add(1);
      wake_waiters(&word);
    }
  });
  while (io.ends.load(std::memory_order_acquire) == 0) dev.queue().wait(cookie, &word, woken ? word.load() : v);
  back = true;
  helper.join();
  EXPECT_EQ(io.bio.status, BlkStatus::ok);
  return !woken.load();
}

// The futex wait a waiter leaves armed in the ring must not be on the
// caller's word: once Queue::wait returned the word is the caller's again,
// and a single wake meant for a plain futex sleeper on it must reach that
// sleeper, not a stale arm in the ring.
TEST_F(UringWait, StaleArmDoesNotTakeAWakeMeantForAnotherSleeper) {
  if (!futex_op()) GTEST_SKIP() << "no IORING_OP_FUTEX_WAIT";
  auto dev = make();
  ASSERT_TRUE(dev);
  test::Watchdog dog("StaleArm", std::chrono::seconds(60));
  AlignedBuf buf(kBlock);
  // A read on the ring, for the cookie Queue::wait finds the ring by.
  std::atomic<uint32_t> first{0};
  WaitIo io;
  io.prep(0, buf.data, &first);
  dev->queue().submit_bio(&io.bio);
  wait_ended(dev->queue(), io);
  std::atomic<uint32_t> word{0};
  bool left = false;
  for (int attempt = 0; attempt < 5 && !left; attempt++) left = leave_stale_arm(*dev, &io.bio, word, buf.data);
  ASSERT_TRUE(left) << "Queue::wait never slept in the ring";
  const uint32_t v = word.load();
  std::atomic<bool> back{false};
  std::atomic<pid_t> tid{0};
  std::thread sleeper([&] {
    tid = test::this_tid();
    while (word.load() == v)
      syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT_PRIVATE, v, nullptr, nullptr, 0);
    back.store(true);
  });
  // The single wake must find the sleeper already asleep on the word.
  EXPECT_TRUE(test::eventually([&] { return tid.load() && test::asleep_in(tid.load(), SYS_futex); }));
  word.fetch_add(1);
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
  EXPECT_TRUE(test::eventually([&] { return back.load(); }, 5000)) << "the single wake went to an arm left in the ring";
  if (!back.load())
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
  sleeper.join();
}

// Several threads on one ring: some wait in it, some wait on their own
// (spinning on the bio) and rely on the reaper. Every read ends once, ok,
// whoever reaps it, while the waiters mute and unmute the reaper.
TEST_F(UringWait, WaitersAndNonWaitersShareOneRing) {
  auto dev = make();
  ASSERT_TRUE(dev);
  test::Watchdog dog("WaitersAndNonWaiters", std::chrono::seconds(120));
  constexpr int kThreads = 4, kDepth = 4;
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(
                                                          static_cast<int>(1500 * test::stress_scale()));
  std::atomic<long> done{0};
  auto worker = [&](int id) {
    const bool waits_in_queue = id % 2 == 0;
    AlignedBuf buf(kBlock * kDepth);
    std::atomic<uint32_t> word{0};
    std::mt19937 rng(id);
    std::vector<WaitIo> ios(kDepth);
    while (std::chrono::steady_clock::now() < end) {
      for (int i = 0; i < kDepth; i++) {
        ios[i].ends.store(0);
        ios[i].prep(uint64_t{rng() % (kFileSize / kBlock)} * kBlock, buf.data + i * kBlock, &word);
        dev->queue().submit_bio(&ios[i].bio);
      }
      for (int i = 0; i < kDepth; i++) {
        if (waits_in_queue) {
          wait_ended(dev->queue(), ios[i]);
        } else {
          while (ios[i].ends.load(std::memory_order_acquire) == 0) std::this_thread::yield();
        }
        EXPECT_EQ(ios[i].bio.status, BlkStatus::ok);
      }
      // Every read of the batch ended exactly once before the next reuses it.
      for (auto& io : ios) EXPECT_EQ(io.ends.load(), 1);
      done.fetch_add(kDepth);
    }
  };
  std::vector<std::thread> ts;
  for (int i = 0; i < kThreads; i++) ts.emplace_back(worker, i);
  for (auto& t : ts) t.join();
  EXPECT_GT(done.load(), 0);
}

// Regression (uring_wait: a wake reaped away before the sleep): a waiter
// found the CQ empty and went to sleep in the ring, but in between its
// armed futex wait fired (task work posts the CQE at any return to user
// space) and another thread reaped that CQE; io_uring's wait counts from
// the head it finds, so the waiter slept with nothing left to wake it
// (CI: WaitersAndNonWaitersShareOneRing hung under TSan; gdb showed the
// arm consumed, the word moved on and the CQ empty). Here the waiters go in
// rounds with nothing in flight between them, so a lost wake in any round
// stops the test (the watchdog), and a thread wakes the words for nothing
// all the time, so arms fire and are reaped by whoever comes first.
TEST_F(UringWait, ArmReapedElsewhereBeforeTheSleepDoesNotLoseTheWake) {
  if (!futex_op()) GTEST_SKIP() << "no IORING_OP_FUTEX_WAIT";
  auto dev = make();
  ASSERT_TRUE(dev);
  test::Watchdog dog("ArmReapedElsewhere", std::chrono::seconds(60));
  constexpr int kWaiters = 3;
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(
                                                          static_cast<int>(3000 * test::stress_scale()));
  std::atomic<uint32_t> words[kWaiters] = {};
  std::atomic<bool> stop{false};
  std::thread noise([&] {
    for (unsigned i = 0; !stop.load(std::memory_order_relaxed); i++) {
      // A wake with no change of the word: the sleeper looks and sleeps
      // again, but its arm fired and its CQE is there for anyone to reap.
      wake_waiters(&words[i % kWaiters]);
      if (i % 16 == 0) std::this_thread::yield();
    }
  });
  std::atomic<bool> more{true};
  std::barrier round(kWaiters, [&]() noexcept { more.store(std::chrono::steady_clock::now() < end); });
  std::atomic<long> done{0};
  auto waiter = [&](int id) {
    AlignedBuf buf(kBlock);
    std::mt19937 rng(id);
    WaitIo io;
    round.arrive_and_wait();
    while (more.load()) {
      io.ends.store(0);
      io.prep(uint64_t{rng() % (kFileSize / kBlock)} * kBlock, buf.data, &words[id]);
      dev->queue().submit_bio(&io.bio);
      wait_ended(dev->queue(), io);
      EXPECT_EQ(io.bio.status, BlkStatus::ok);
      done.fetch_add(1);
      round.arrive_and_wait();
    }
  };
  std::vector<std::thread> ts;
  for (int i = 0; i < kWaiters; i++) ts.emplace_back(waiter, i);
  for (auto& t : ts) t.join();
  stop.store(true);
  noise.join();
  EXPECT_GT(done.load(), 0);
}

}  // namespace
}  // namespace blkmq

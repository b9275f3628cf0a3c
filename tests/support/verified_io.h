// Verified I/O for the multi-threaded scenarios: workers that each own a
// disjoint block range, write patterns and read them back, and count every
// bio's end, so a scenario can assert that nothing was lost, ended twice,
// failed or returned the wrong data while it resized, switched or faulted
// the queue underneath.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "base/event.h"
#include "blkmq/blkmq.h"

namespace blkmq::test {

constexpr uint32_t kVerifyBlock = 4096;

// One outstanding I/O of a worker.
struct VerifiedIo {
  Bio bio;
  iovec v;
  alignas(64) uint8_t buf[kVerifyBlock];
  std::atomic<int> ends{0};
  std::atomic<uint32_t> done{1};  // see kIoWaitedFor
  uint64_t block = 0;
  bool is_write = false;
  uint32_t pattern = 0;
};

// What the workers of one run saw, summed.
struct IoTotals {
  std::atomic<uint64_t> submitted{0}, ended{0}, doubles{0}, errors{0}, timeouts{0}, mismatches{0};
  std::atomic<uint64_t> flushes{0}, flush_errors{0};
  // The run lost nothing: every bio ended once, none failed (timeouts
  // apart when `timeouts_ok`), every read returned what was written.
  void expect_clean(bool timeouts_ok = false) const {
    EXPECT_EQ(ended.load(), submitted.load());
    EXPECT_EQ(doubles.load(), 0u);
    EXPECT_EQ(errors.load(), 0u);
    EXPECT_EQ(mismatches.load(), 0u);
    EXPECT_EQ(flush_errors.load(), 0u);
    if (!timeouts_ok) {
      EXPECT_EQ(timeouts.load(), 0u);
    }
  }
};

// An I/O's end flag its owner can sleep on (VerifiedIo::done): 0 in
// flight, 1 ended, kIoWaitedFor in flight with the owner asleep in
// wait_io_done. Only that wait sets it and it returns at 1, so the
// owner's own loops, the only other readers, see 0 or 1.
inline constexpr uint32_t kIoWaitedFor = 2;

// From the I/O's end_io, as its last touch of the I/O: only the word's
// address is used after the exchange (the owner may have seen it and
// freed the I/O, and a private futex wake merely hashes the address, as
// base::Completion relies on). A wake only when the owner sleeps, and no
// lock, so completions gain no ordering among themselves that TSan would
// credit to the library.
inline void mark_io_done(std::atomic<uint32_t>& done) {
  if (done.exchange(1, std::memory_order_release) == kIoWaitedFor) base::futex_wake(&done, 1);
}

// Sleeps until the I/O has ended. The owner's thread only; not for a
// polled bio (only the owner's poll would end it).
inline void wait_io_done(std::atomic<uint32_t>& done) {
  uint32_t v = 0;
  // Acquire on failure too: an I/O already ended is reaped right after.
  if (!done.compare_exchange_strong(v, kIoWaitedFor, std::memory_order_acquire)) return;
  while (done.load(std::memory_order_acquire) == kIoWaitedFor) base::futex_wait(&done, kIoWaitedFor);
}

inline void verified_end_io(Bio* b) {
  auto* io = static_cast<VerifiedIo*>(b->private_data);
  io->ends.fetch_add(1);
  mark_io_done(io->done);
}

inline void wait_verified_io(VerifiedIo& io) { wait_io_done(io.done); }

// Points io's bio at its own buffer, one block at `lba_block` (in
// kVerifyBlock units), ending in verified_end_io, and marks it not done;
// the caller fills the buffer of a write first, then submits io.bio.
inline void start_verified_io(VerifiedIo& io, uint64_t lba_block, ReqOp op, uint32_t flags = 0) {
  io.v = iovec{io.buf, kVerifyBlock};
  io.bio = Bio{};
  io.bio.op = op;
  io.bio.flags = flags;
  io.bio.sector = lba_block * (kVerifyBlock >> 9);
  io.bio.size = kVerifyBlock;
  io.bio.vec = &io.v;
  io.bio.nr_vecs = 1;
  io.bio.end_io = verified_end_io;
  io.bio.private_data = &io;
  io.done.store(0, std::memory_order_relaxed);
}

inline void verified_fill(uint8_t* p, uint64_t block, uint32_t pattern) {
  for (uint32_t i = 0; i < kVerifyBlock; i += 8) {
    uint64_t v = (block << 32) ^ pattern ^ i;
    std::memcpy(p + i, &v, 8);
  }
}

// Keeps `depth` I/Os going over blocks [id*nblocks, (id+1)*nblocks) of q
// until `stop`, then waits for its own to end. Half writes, half reads;
// with `verify`, every read of a written block is compared. With
// `flushes`, writes cycle through plain, FUA, preflush and preflush+FUA,
// and every 32nd I/O slot first issues an empty flush (counted in
// t.flushes). One thread.
void verified_worker(Queue& q, unsigned id, unsigned nblocks, unsigned depth, std::atomic<bool>& stop,
                     IoTotals& t, bool verify, bool flushes = false);

// Runs `nthreads` workers on dev's queue for `seconds`, calling `during`
// every 10 ms from the calling thread meanwhile; returns when every worker
// has reaped all of its I/O.
void run_verified_workers(Device& dev, unsigned nthreads, double seconds, IoTotals& t, bool verify,
                          const std::function<void()>& during = nullptr);

// A null device with these parameters, or nullptr with a test failure.
std::unique_ptr<Device> make_null_device(ParamMap p);

// Every driver and scheduler tag of every hw queue is free, no request is
// in flight, and the scheduler holds nothing (waits up to ~1 s for the
// last completions to be freed, which follows their bios' end).
void expect_queue_idle(Queue& q, const char* what);

}  // namespace blkmq::test

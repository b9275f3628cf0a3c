// Durability through the core, checked by cutting the power of null's
// write-back cache (device/power_cut) under every scheduler, with native
// FUA (fua=1) and with FUA emulated by the flush machinery (fua=0).
// Writers stamp every word of each 4 KiB block with (block, sequence),
// mixing plain, FUA, PREFLUSH and PREFLUSH|FUA writes with empty flushes;
// after the cut every block must read untorn, as one of the versions
// written to it, and no older than the newest one that was made durable:
// a FUA write once acknowledged, any write acknowledged before a PREFLUSH
// write or an empty flush was submitted once that one completed. Variants
// add requeues (null's requeue injection), merges (plugged adjacent
// writes), splits (writes above max_sectors), a scheduler switch during
// the run, and cuts while I/O is in flight.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "blkmq/blkmq.h"
#include "support/stress.h"
#include "support/verified_io.h"
#include "support/watchdog.h"

namespace blkmq::test {
namespace {

constexpr uint32_t kBlock = 4096;
constexpr unsigned kMaxRun = 4;  // blocks per bio at most
constexpr const char* kScheds[] = {"none", "mq-deadline", "kyber", "bfq"};

uint64_t stamp_word(uint64_t block, uint32_t seq) { return (block << 32) | seq; }

void fill_stamp(unsigned char* p, uint64_t block, uint32_t seq) {
  const uint64_t w = stamp_word(block, seq);
  for (uint32_t i = 0; i < kBlock; i += 8) std::memcpy(p + i, &w, 8);
}

// The sequence a block read back holds: 0 for zeros (never durable), -1
// for a torn block or another block's stamp.
int64_t read_stamp(const unsigned char* p, uint64_t block) {
  uint64_t w;
  std::memcpy(&w, p, 8);
  for (uint32_t i = 8; i < kBlock; i += 8)
    if (std::memcmp(p + i, &w, 8) != 0) return -1;
  if (w == 0) return 0;
  if (w >> 32 != block) return -1;
  return static_cast<uint32_t>(w);
}

struct WriterOptions {
  bool merges = false;     // some writes are runs of adjacent single-block bios under a plug
  bool multi = false;      // some bios cover up to kMaxRun blocks (split above max_sectors)
  bool check_floor = true; // false when cuts ran during the I/O: durability then says nothing
};

// What the verification found, summed over the writers.
struct CutReport {
  std::atomic<uint64_t> writes{0}, flushes{0}, errors{0}, doubles{0};
  std::atomic<uint64_t> torn{0}, unknown{0}, too_old{0}, lost{0}, checked_floors{0};
  uint64_t write_merges = 0, busy = 0;  // the queue's, after the run: merges, busy returns (requeues)
};

// One thread's writes over its own blocks [base, base + nblocks), at most
// one bio per block in flight, so each block's versions are ordered.
class DurabilityWriter {
 public:
  DurabilityWriter(Queue& q, unsigned id, unsigned nblocks, unsigned depth, const WriterOptions& o)
      : q_(q), base_(uint64_t(id) * nblocks), o_(o), rng_(id * 7919 + 3), blocks_(nblocks), slots_(depth) {
    for (Slot& s : slots_) s.buf.resize(kMaxRun * kBlock);
  }

  // Writes until `stop`, then reaps everything.
  void run(const std::atomic<bool>& stop, CutReport& r) {
    while (!stop.load(std::memory_order_relaxed)) {
      reap_all(r, false);
      if (rng_() % 16 == 0) flush(r);
      else if (o_.merges && rng_() % 3 == 0) submit_plugged_run(r);
      else submit_one(r);
      std::this_thread::yield();
    }
    reap_all(r, true);
  }

  // Once every writer has stopped, one at a time: plain writes made
  // durable by an empty flush alone, then one FUA write, then plain
  // writes the cut may lose. The random phase has so many PREFLUSH and
  // FUA writes that each flushes what an early-ending flush left; here
  // nothing else writes the cache back before the cut.
  void finish(CutReport& r) {
    for (unsigned b = 0; b < 4; b++) submit(*free_slot(), b, 1, 0, r);
    reap_all(r, true);
    flush(r);
    submit(*free_slot(), 4, 1, kBioFua, r);
    reap_all(r, true);
    for (unsigned b = 5; b < 9; b++) submit(*free_slot(), b, 1, 0, r);
    reap_all(r, true);
  }

  // After the cut: reads every block back and checks it against the log.
  void verify(CutReport& r) {
    std::vector<unsigned char> buf(kBlock);
    for (unsigned b = 0; b < blocks_.size(); b++) {
      ASSERT_EQ(q_.read_sync(buf.data(), (base_ + b) * kBlock, kBlock), BlkStatus::ok);
      const Block& k = blocks_[b];
      const int64_t v = read_stamp(buf.data(), base_ + b);
      const auto seq = static_cast<uint32_t>(v);
      if (v < 0) {
        r.torn++;
        ADD_FAILURE() << "block " << base_ + b << " is torn or holds another block's data";
      } else if (v != 0 && !std::binary_search(k.seqs.begin(), k.seqs.end(), seq)) {
        r.unknown++;
        ADD_FAILURE() << "block " << base_ + b << " holds version " << v << ", never written to it";
      } else if (o_.check_floor && seq < k.floor) {
        r.too_old++;
        ADD_FAILURE() << "block " << base_ + b << " reads version " << v << " but version " << k.floor
                      << " was made durable (last written " << k.acked << ")";
      }
      r.lost += v >= 0 && seq < k.acked;
      r.checked_floors += k.floor > 0;
    }
  }

 private:
  struct Block {
    uint32_t acked = 0;  // newest version acknowledged
    uint32_t floor = 0;  // newest version made durable
    bool busy = false;
    std::vector<uint32_t> seqs;  // every version written, ascending
  };
  struct Slot {
    Bio bio;
    iovec iov{};
    std::vector<unsigned char> buf;
    std::atomic<int> ends{0};
    std::atomic<uint32_t> done{1};  // mark_io_done, wait_io_done
    bool used = false;
    unsigned first = 0, n = 0;
    uint32_t seq = 0;
    std::vector<uint32_t> acked_at_submit;  // for a PREFLUSH write
  };

  static void end_io(Bio* b) {
    auto* s = static_cast<Slot*>(b->private_data);
    s->ends.fetch_add(1);
    mark_io_done(s->done);
  }

  std::vector<uint32_t> acked_now() const {
    std::vector<uint32_t> v(blocks_.size());
    for (size_t i = 0; i < v.size(); i++) v[i] = blocks_[i].acked;
    return v;
  }

  void raise_floors(const std::vector<uint32_t>& durable) {
    for (size_t i = 0; i < durable.size(); i++) blocks_[i].floor = std::max(blocks_[i].floor, durable[i]);
  }

  Slot* free_slot() {
    for (Slot& s : slots_)
      if (!s.used) return &s;
    return nullptr;
  }

  bool range_free(unsigned first, unsigned n) const {
    for (unsigned i = first; i < first + n; i++)
      if (blocks_[i].busy) return false;
    return true;
  }

  void submit(Slot& s, unsigned first, unsigned n, uint32_t flags, CutReport& r) {
    s.used = true;
    s.first = first;
    s.n = n;
    s.seq = ++seq_;
    for (unsigned i = 0; i < n; i++) {
      Block& k = blocks_[first + i];
      k.busy = true;
      k.seqs.push_back(s.seq);
      fill_stamp(s.buf.data() + i * kBlock, base_ + first + i, s.seq);
    }
    if (flags & kBioPreflush) s.acked_at_submit = acked_now();
    s.iov = {s.buf.data(), n * kBlock};
    s.bio = Bio{};
    s.bio.op = ReqOp::write;
    s.bio.flags = flags;
    s.bio.sector = (base_ + first) * (kBlock >> kSectorShift);
    s.bio.size = n * kBlock;
    s.bio.vec = &s.iov;
    s.bio.nr_vecs = 1;
    s.bio.end_io = end_io;
    s.bio.private_data = &s;
    s.ends.store(0, std::memory_order_relaxed);
    s.done.store(0, std::memory_order_relaxed);
    r.writes++;
    q_.submit_bio(&s.bio);
  }

  void submit_one(CutReport& r) {
    static constexpr uint32_t kFlags[6] = {0, 0, kBioFua, kBioPreflush, kBioPreflush | kBioFua, 0};
    Slot* s = free_slot();
    if (!s) return;
    const unsigned n = o_.multi ? 1 + static_cast<unsigned>(rng_() % kMaxRun) : 1;
    const unsigned first = static_cast<unsigned>(rng_() % (blocks_.size() - n + 1));
    if (!range_free(first, n)) return;
    submit(*s, first, n, kFlags[rng_() % 6], r);
  }

  // Adjacent single-block plain writes under one plug: they merge.
  void submit_plugged_run(CutReport& r) {
    const unsigned first = static_cast<unsigned>(rng_() % (blocks_.size() - kMaxRun + 1));
    if (!range_free(first, kMaxRun)) return;
    Plug plug(kMaxRun);
    for (unsigned i = 0; i < kMaxRun; i++) {
      Slot* s = free_slot();
      if (!s) return;
      submit(*s, first + i, 1, 0, r);
    }
  }

  void flush(CutReport& r) {
    const std::vector<uint32_t> before = acked_now();
    r.flushes++;
    const BlkStatus st = q_.flush_sync();
    if (st != BlkStatus::ok) {
      r.errors++;
      ADD_FAILURE() << "flush ended " << static_cast<int>(st);
      return;
    }
    raise_floors(before);
  }

  void reap(Slot& s, CutReport& r) {
    s.used = false;
    if (s.ends.load() != 1) r.doubles++;
    if (s.bio.status != BlkStatus::ok) {
      r.errors++;
      for (unsigned i = s.first; i < s.first + s.n; i++) blocks_[i].busy = false;
      return;
    }
    for (unsigned i = s.first; i < s.first + s.n; i++) {
      Block& k = blocks_[i];
      k.busy = false;
      k.acked = s.seq;
      if (s.bio.flags & kBioFua) k.floor = s.seq;
    }
    if (s.bio.flags & kBioPreflush) raise_floors(s.acked_at_submit);
  }

  // wait: until every slot has ended (each end wakes the slot's word).
  void reap_all(CutReport& r, bool wait) {
    for (Slot& s : slots_) {
      if (!s.used) continue;
      if (wait) wait_io_done(s.done);
      if (s.done.load(std::memory_order_acquire)) reap(s, r);
    }
  }

  Queue& q_;
  uint64_t base_;
  WriterOptions o_;
  std::mt19937_64 rng_;
  uint32_t seq_ = 0;
  std::vector<Block> blocks_;
  std::vector<Slot> slots_;
};

struct CutRun {
  ParamMap params;
  WriterOptions writer;
  double seconds = 0.15;
  std::function<void(Queue&)> during = nullptr;  // called every 5 ms while the writers run
};

constexpr unsigned kWriters = 4, kBlocksEach = 64, kDepth = 8;

// Runs the writers, cuts the power once they are done, and checks every
// block. Returns what was seen, for the caller's own expectations.
void run_and_cut(const CutRun& run, const std::string& what, CutReport& r) {
  SCOPED_TRACE(what);
  auto dev = make_null_device(run.params);
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  std::vector<std::unique_ptr<DurabilityWriter>> writers;
  for (unsigned i = 0; i < kWriters; i++)
    writers.push_back(std::make_unique<DurabilityWriter>(q, i, kBlocksEach, kDepth, run.writer));
  std::atomic<bool> stop{false};
  std::vector<std::thread> th;
  for (auto& w : writers) th.emplace_back([&, p = w.get()] { p->run(stop, r); });
  TimeLimit limit(std::chrono::milliseconds(static_cast<int>(run.seconds * 1000 * stress_scale())));
  while (!limit.passed()) {
    if (run.during) run.during(q);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the pace of `during`, not a wait for I/O
  }
  stop = true;
  for (auto& t : th) t.join();
  for (auto& w : writers) w->finish(r);
  expect_queue_idle(q, what.c_str());
  r.write_merges = q.disk_stat().write_merges;
  for (unsigned i = 0; i < q.nr_hw_queues(); i++) r.busy += q.hctx_stats(i).busy;
  EXPECT_NE(*q.attr("device/cache_pages"), "0") << "nothing volatile before the cut: it tests nothing";
  ASSERT_TRUE(q.set_attr("device/power_cut", "1"));
  for (auto& w : writers) w->verify(r);
  EXPECT_EQ(r.errors.load(), 0u);
  EXPECT_EQ(r.doubles.load(), 0u);
  EXPECT_GT(r.flushes.load(), 0u);
}

ParamMap cached_null(const char* sched, const char* fua) {
  return {{"memory_backed", "1"}, {"size", "64"}, {"cache_size", "16"}, {"fua", fua},
          {"irqmode", "1"},       {"submit_queues", "2"}, {"hw_queue_depth", "16"},
          {"attr:queue/scheduler", sched}};
}

TEST(PowerCut, FlushedAndFuaWritesSurviveUnderEveryScheduler) {
  Watchdog wd("PowerCut.FlushedAndFuaWritesSurviveUnderEveryScheduler", std::chrono::seconds(120));
  for (const char* sched : kScheds) {
    for (const char* fua : {"1", "0"}) {
      CutReport r;
      run_and_cut({cached_null(sched, fua), {}}, std::string(sched) + " fua=" + fua, r);
      EXPECT_GT(r.checked_floors.load(), 0u) << sched << " fua=" << fua;
      EXPECT_GT(r.lost.load(), 0u) << sched << " fua=" << fua << ": the cut lost nothing";
    }
  }
}

TEST(PowerCut, OrderingHoldsUnderRequeuesMergesAndSplits) {
  Watchdog wd("PowerCut.OrderingHoldsUnderRequeuesMergesAndSplits", std::chrono::seconds(120));
  for (const char* sched : kScheds) {
    for (const char* fua : {"1", "0"}) {
      ParamMap p = cached_null(sched, fua);
      p["requeue"] = "1,10,0,-1";  // one request in ten, flushes included, goes back to the core
      p["max_sectors"] = "16";     // 8 KiB: the up-to-16 KiB bios split
      CutRun run{p, {}};
      run.writer.merges = run.writer.multi = true;
      CutReport r;
      const std::string what = std::string(sched) + " fua=" + fua;
      run_and_cut(run, what, r);
      EXPECT_GT(r.checked_floors.load(), 0u) << what;
      EXPECT_GT(r.write_merges, 0u) << what;
      EXPECT_GT(r.busy, 0u) << what << ": no request was requeued";
    }
  }
}

TEST(PowerCut, SchedulerSwitchDuringTheRunLosesNothingDurable) {
  Watchdog wd("PowerCut.SchedulerSwitchDuringTheRunLosesNothingDurable", std::chrono::seconds(120));
  for (const char* fua : {"1", "0"}) {
    CutRun run{cached_null("none", fua), {}};
    run.writer.merges = true;
    run.seconds = 0.3;
    unsigned next = 1;
    run.during = [&next](Queue& q) { ASSERT_TRUE(q.set_attr("queue/scheduler", kScheds[next++ % 4])); };
    CutReport r;
    run_and_cut(run, std::string("switching, fua=") + fua, r);
    EXPECT_GE(next, 4u) << "the run saw every scheduler";
  }
}

// Cuts while writes and flushes are in flight: no lock is missing (the
// sanitizer runs), no block is torn or holds data never written to it,
// and the device goes on working. Durability says nothing here: a cut may
// drop what a flush in flight was about to write back.
TEST(PowerCut, CutsDuringIoTearNoBlock) {
  Watchdog wd("PowerCut.CutsDuringIoTearNoBlock", std::chrono::seconds(120));
  for (const char* sched : kScheds) {
    CutRun run{cached_null(sched, "0"), {}};
    run.writer.multi = true;
    run.writer.check_floor = false;
    unsigned cuts = 0;
    run.during = [&cuts](Queue& q) {
      ASSERT_TRUE(q.set_attr("device/power_cut", "1"));
      cuts++;
    };
    CutReport r;
    run_and_cut(run, std::string("cuts during I/O, ") + sched, r);
    EXPECT_GE(cuts, 1u);
  }
}

}  // namespace
}  // namespace blkmq::test

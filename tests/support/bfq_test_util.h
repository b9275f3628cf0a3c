// Shared fixture for the bfq tests: a stub driver that holds what it gets,
// on a ManualRuntime (the clock, the timers, kblockd and the softirq are
// the test's to step), and a queue whose dispatch decisions the test makes
// itself. bfq is put on hold (has_work says no), so the core never pulls
// from it; the test calls the dispatch hook at a chosen time, hands the
// request to the driver through the hctx dispatch list, and completes it
// at another time. bfq's idle timer fires when advance passes its expiry.
// Every decision is therefore made in the test thread, at a known time,
// and the results are exact.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "support/stub_driver.h"
#include "sched/bfq/bfq.h"

namespace blkmq::test {

constexpr uint64_t kBfqMs = 1000 * 1000;
constexpr uint64_t kBfqUs = 1000;

enum class BfqInsert { locked, split, split_parked };

inline std::string bfq_mode_name(const ::testing::TestParamInfo<BfqInsert>& i) {
  switch (i.param) {
    case BfqInsert::locked: return "locked";
    case BfqInsert::split: return "split";
    default: return "split_parked";
  }
}

// An I/O context of the test's own (bio->ioc), with a unique id far from
// the ids of thread contexts. Like a thread's context it must outlive the
// requests that point to it (parked requests may be inserted at teardown),
// so every one is kept until the process exits.
inline std::shared_ptr<IoContext> make_ioc(uint16_t weight = 100, uint16_t ioprio = kIoprioDefault) {
  static std::atomic<uint64_t> next{1ull << 48};
  static std::mutex mu;
  static std::vector<std::shared_ptr<IoContext>> keep;
  auto c = std::make_shared<IoContext>();
  c->weight = weight;
  c->ioprio = ioprio;
  c->id = next.fetch_add(1);
  std::lock_guard<std::mutex> g(mu);
  keep.push_back(c);
  return c;
}

class BfqSim {
 public:
  explicit BfqSim(BfqInsert mode = BfqInsert::locked, unsigned depth = 256, bool rotational = false) {
    StubDriver::Options o;
    o.scheduler = "bfq";
    o.runtime = &rt_;  // the queue's clock and contexts: the core's and bfq's
    o.mode = CompleteMode::never;
    o.depth = depth;
    o.max_sectors = 1024;
    o.rotational = rotational;
    d_ = std::make_unique<StubDriver>(o);
    EXPECT_TRUE(q().set_attr("queue/iosched/insert_lists", mode == BfqInsert::locked ? "locked" : "split"));
    bfq_set_always_defer(&q(), mode == BfqInsert::split_parked);
    bfq_set_hold(&q(), true);
    buf_.assign(1024 * 512, 0);
  }

  ~BfqSim() {
    drain();
    d_.reset();
  }

  Queue& q() { return d_->q(); }
  StubDriver& d() { return *d_; }

  void set(const char* name, const std::string& value) {
    Status st = q().set_attr(std::string("queue/iosched/") + name, value);
    ASSERT_TRUE(st) << name << "=" << value << ": " << st.message();
  }

  // Moves time; bfq's idle timer fires on the way if it falls due, and
  // what it queues runs. Returns the timers fired.
  size_t advance_us(uint64_t us) { return rt_.advance(us * kBfqUs); }
  size_t advance_ms(uint64_t ms) { return rt_.advance(ms * kBfqMs); }
  uint64_t now_ns() const { return rt_.now_ns(); }
  ManualRuntime& rt() { return rt_; }

  // Submits one bio of `sectors` for ctx; it ends up queued in bfq.
  void submit(IoContext* ctx, uint64_t sector, uint32_t sectors = 8, ReqOp op = ReqOp::read, uint32_t flags = 0) {
    auto io = std::make_unique<Io>();
    io->v = iovec{buf_.data(), sectors * 512u};
    io->bio.op = op;
    io->bio.flags = flags;
    io->bio.sector = sector;
    io->bio.size = sectors * 512u;
    io->bio.vec = &io->v;
    io->bio.nr_vecs = 1;
    io->bio.ioc = ctx;
    io->bio.end_io = &BfqSim::end_io;
    io->bio.private_data = this;
    Bio* b = &io->bio;
    {
      std::lock_guard<std::mutex> g(mu_);
      ios_.emplace(b, std::move(io));
    }
    submitted_++;
    q().submit_bio(b);
  }

  // The next request bfq chooses now, handed to the driver; nullptr if bfq
  // chooses none (idling, or empty).
  Request* dispatch() {
    HwCtx* h = queue_hctx(&q(), 0);
    Request* rq = queue_elevator(&q())->type->ops.dispatch_request(h);
    if (!rq) return nullptr;
    request_bypass_insert(rq, 0);
    run_hw_queue(static_cast<HwCtxImpl*>(h), false);
    rt_.run_pending();
    for (Request* r : d_->take_held()) held_.push_back(r);
    for (Request* r : held_)
      if (r == rq) return rq;
    ADD_FAILURE() << "the driver never got the dispatched request";
    return nullptr;
  }

  // Completes a request the driver holds (at the current time).
  void complete(Request* rq) {
    for (auto it = held_.begin(); it != held_.end(); ++it)
      if (*it == rq) {
        held_.erase(it);
        break;
      }
    {
      std::lock_guard<std::mutex> g(mu_);
      done_.clear();  // ended before this call: the core is done with them
    }
    complete_request(rq, BlkStatus::ok);
    rt_.run_pending();
  }

  // Dispatch, service for `service_us`, complete: returns the request's
  // context and sectors, or {nullptr, 0} if bfq dispatched nothing.
  std::pair<const IoContext*, uint32_t> serve_one(uint64_t service_us) {
    Request* rq = dispatch();
    if (!rq) return {nullptr, 0};
    const IoContext* ctx = rq->ioc;
    const uint32_t sectors = rq->data_len >> 9;
    advance_us(service_us);
    complete(rq);
    return {ctx, sectors};
  }

  int ended() const { return ended_.load(); }
  int submitted() const { return submitted_; }

  // Lets everything through so the queue can be torn down: rounds of
  // completing what the driver holds and running what that queued, until
  // every bio ended or a round makes no progress.
  void drain() {
    if (!d_) return;
    EXPECT_TRUE(q().set_attr("queue/iosched/slice_idle", "0"));
    advance_ms(1000);  // an armed idle timer fires
    // complete() erases from held_: walk a copy, or every other one is skipped.
    const std::vector<Request*> held = std::move(held_);
    held_.clear();
    for (Request* rq : held) complete(rq);
    bfq_set_hold(&q(), false);
    run_hw_queues(&q(), false);
    for (size_t progress = 1; progress && ended_.load() < submitted_;) {
      auto more = d_->take_held();
      for (Request* rq : more) complete(rq);
      run_hw_queues(&q(), false);
      progress = more.size() + rt_.run_pending();
    }
    EXPECT_EQ(ended_.load(), submitted_);
    EXPECT_EQ(doubles_.load(), 0);
  }

 private:
  struct Io {
    Bio bio;
    iovec v;
  };
  static void end_io(Bio* b) {
    auto* sim = static_cast<BfqSim*>(b->private_data);
    std::lock_guard<std::mutex> g(sim->mu_);
    auto it = sim->ios_.find(b);
    if (it == sim->ios_.end()) {
      sim->doubles_++;  // ended after it was already ended and reaped
    } else {
      sim->done_.push_back(std::move(it->second));
      sim->ios_.erase(it);
    }
    sim->ended_++;
  }

  ManualRuntime rt_;  // before d_: the tag set on it dies first
  std::unique_ptr<StubDriver> d_;
  std::vector<uint8_t> buf_;
  std::mutex mu_;
  std::unordered_map<Bio*, std::unique_ptr<Io>> ios_;  // in flight
  std::vector<std::unique_ptr<Io>> done_;              // ended, freed later
  std::vector<Request*> held_;
  std::atomic<int> ended_{0};
  std::atomic<int> doubles_{0};
  int submitted_ = 0;
};

inline uint16_t rt_prio(unsigned level = 4) { return ioprio_value(IoprioClass::rt, level); }
inline uint16_t idle_prio() { return ioprio_value(IoprioClass::idle, 7); }

// Keeps `depth` requests of `sectors` queued for a context, spaced so that
// they never merge (a gap after each) but stay sequential for bfq, within
// `span` sectors from `base` (several streams share the stub's 64 MiB).
struct Stream {
  IoContext* ctx;
  uint64_t base;
  uint64_t span = 60000;
  uint32_t sectors = 64;
  uint64_t next = 0;
  void one(BfqSim& sim) {
    sim.submit(ctx, base + next % span, sectors);
    next += 2 * sectors;
  }
  void fill(BfqSim& sim, int depth) {
    for (int i = 0; i < depth; i++) one(sim);
  }
};

}  // namespace blkmq::test

// Shared fixture for the mq-deadline tests: a stub driver that holds what it
// gets (CompleteMode::never) on a ManualRuntime, so the clock, the queue
// runs and the completions are the test's to step, and the three ways
// requests reach the scheduler (locked, split, split always parking).
// Everything runs on the test's thread: no sleeps, no races.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "support/stub_driver.h"
#include "sched/deadline/deadline.h"

namespace blkmq::test {

enum class InsertMode { locked, split, split_parked };

inline std::string mode_name(const ::testing::TestParamInfo<InsertMode>& i) {
  switch (i.param) {
    case InsertMode::locked: return "locked";
    case InsertMode::split: return "split";
    default: return "split_parked";
  }
}

constexpr uint64_t kMsNs = 1000 * 1000;

class DeadlineTest : public ::testing::TestWithParam<InsertMode> {
 protected:
  void TearDown() override {
    if (d_) drain();
    d_.reset();
  }

  // A stopped queue on mq-deadline; with one_at_a_time only one request is
  // with the driver at a time (a budget of one), so each dispatch decision
  // can be made at a chosen time.
  StubDriver& make(bool one_at_a_time = false, unsigned depth = 64) {
    StubDriver::Options o;
    o.scheduler = "mq-deadline";
    o.runtime = &rt_;  // the queue's clock, runs and completions: the test's
    o.mode = CompleteMode::never;
    o.depth = depth;
    o.budgets = one_at_a_time;
    o.budget_limit = 1;
    d_ = std::make_unique<StubDriver>(o);
    const InsertMode m = GetParam();
    EXPECT_TRUE(d_->q().set_attr("queue/iosched/insert_lists", m == InsertMode::locked ? "locked" : "split"));
    deadline_set_always_defer(&d_->q(), m == InsertMode::split_parked);
    stop_hw_queues(&d_->q());
    return *d_;
  }

  void set(const char* name, const char* value) {
    ASSERT_TRUE(d_->q().set_attr(std::string("queue/iosched/") + name, value)) << name;
  }

  void submit(ReqOp op, uint64_t sector, uint32_t sectors = 8, uint16_t ioprio = 0) {
    slots_.push_back(t_.make(op, sector << 9, sectors << 9));
    slots_.back()->bio.ioprio = ioprio;
    submitted_++;
    d_->q().submit_bio(&slots_.back()->bio);
  }

  // Moves the queue's clock; timers due on the way fire, queued runs run.
  void advance_ms(uint64_t ms) { rt_.advance(ms * kMsNs); }
  uint64_t now_ns() const { return rt_.now_ns(); }
  void start() {
    start_stopped_hw_queues(&d_->q(), false);
    rt_.run_pending();
  }

  // Whether n requests have reached the driver once everything queued has
  // run (a completion's rerun goes through kblockd). A dispatch that
  // mq-deadline declined with a budget in hand (a lower priority level
  // while a higher one is in flight) is retried by the core's delayed run,
  // BLK_MQ_BUDGET_DELAY (3 ms) later, as in the kernel: the clock moves up
  // to that far, a millisecond at a time, only when nothing else went.
  bool wait_seen(size_t n) {
    rt_.run_pending();
    for (int ms = 0; ms < 3 && d_->nr_seen() < n; ms++) rt_.advance(kMsNs);
    return d_->nr_seen() >= n;
  }

  // Completes every request the driver holds, so the next can go.
  void complete_held() {
    std::vector<Request*> held = d_->take_held();
    EXPECT_EQ(held.size(), d_->nr_seen() - completed_) << "a request the driver saw is not held";
    completed_ += held.size();
    for (Request* rq : held) complete_request(rq, BlkStatus::ok);
    rt_.run_pending();
  }

  // Lets one request through at a time; returns the sectors in issue order.
  std::vector<uint64_t> step_all(size_t n, uint64_t advance_after_first_ms = 0) {
    start();
    for (size_t i = 1; i <= n; i++) {
      if (!wait_seen(i)) {
        DeadlineStats st = deadline_stats(&d_->q());
        ADD_FAILURE() << "stalled at " << i << ": dispatched " << st.level[1].dispatched << " completed "
                      << st.level[1].completed << " budget_used " << d_->budget_used.load() << " held "
                      << d_->take_held().size();
        break;
      }
      if (i == 1) advance_ms(advance_after_first_ms);
      complete_held();
    }
    return sectors();
  }

  std::vector<uint64_t> sectors() {
    std::vector<uint64_t> v;
    for (const SeenRq& s : d_->seen()) v.push_back(s.sector);
    return v;
  }

  // Ends everything so the queue can be torn down: each round completes
  // what the driver holds and runs what that queued, until every bio has
  // ended or a round makes no progress.
  void drain() {
    start();
    for (size_t progress = 1; progress && t_.ended.load() < submitted_;) {
      std::vector<Request*> held = d_->take_held();
      for (Request* rq : held) complete_request(rq, BlkStatus::ok);
      progress = held.size() + rt_.run_pending();
    }
    EXPECT_EQ(t_.ended.load(), submitted_);
    EXPECT_EQ(t_.doubles.load(), 0);
  }

  ManualRuntime rt_;  // before d_: the tag set on it dies first
  std::unique_ptr<StubDriver> d_;
  BioTracker t_;
  std::vector<std::unique_ptr<BioTracker::Slot>> slots_;
  int submitted_ = 0;
  size_t completed_ = 0;  // requests completed through complete_held
};

inline uint16_t rt() { return ioprio_value(IoprioClass::rt, 0); }
inline uint16_t idle() { return ioprio_value(IoprioClass::idle, 0); }

}  // namespace blkmq::test

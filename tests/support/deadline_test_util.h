// Shared fixture for the mq-deadline tests: a stub driver that holds what it
// gets (CompleteMode::never), a fake clock the test steps, and the three
// ways requests reach the scheduler (locked, split, split always parking).
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

inline std::atomic<uint64_t> g_fake_now{0};
inline uint64_t fake_now() { return g_fake_now.load(std::memory_order_relaxed); }
constexpr uint64_t kMsNs = 1000 * 1000;

class DeadlineTest : public ::testing::TestWithParam<InsertMode> {
 protected:
  void SetUp() override {
    g_fake_now.store(1000 * 1000 * kMsNs);  // far from zero: aging subtracts
  }
  void TearDown() override {
    if (d_) drain();
    d_.reset();
  }

  // A stopped queue on mq-deadline; with one_at_a_time only one request is
  // with the driver at a time (a budget of one), so each dispatch decision
  // can be made at a chosen fake time.
  StubDriver& make(bool one_at_a_time = false, unsigned depth = 64) {
    StubDriver::Options o;
    o.scheduler = "mq-deadline";
    o.clock = &fake_now;  // the queue's clock: the core's and mq-deadline's time
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

  void advance_ms(uint64_t ms) { g_fake_now.fetch_add(ms * kMsNs); }
  void start() { start_stopped_hw_queues(&d_->q(), false); }

  // With a budget of one, a completion's queue rerun can race with a run
  // that just failed to get the budget, and the core does not rerun after a
  // budget failure (the stub driver, like SCSI, owns that restart): nudge
  // the queue every 10 ms, as the kernel's delayed budget rerun would.
  bool wait_seen(size_t n) {
    for (int i = 0; i < 50000 && d_->nr_seen() < n; i++) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
      if (i % 100 == 99) run_hw_queues(&d_->q(), true);
    }
    return d_->nr_seen() >= n;
  }

  // Completes every request the driver has seen so far, so the next can go.
  // The stub records a request (seen) a moment before it holds it: wait
  // for the held ones to catch up (bounded).
  void complete_held() {
    std::vector<Request*> held;
    const size_t want = d_->nr_seen() - completed_;
    for (int k = 0; k < 50000 && held.size() < want; k++) {
      for (Request* rq : d_->take_held()) held.push_back(rq);
      if (held.size() < want) std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    completed_ += held.size();
    for (Request* rq : held) complete_request(rq, BlkStatus::ok);
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

  // Ends everything so the queue can be torn down (bounded).
  void drain() {
    start();
    for (int i = 0; i < 20000 && t_.ended.load() < submitted_; i++) {
      for (Request* rq : d_->take_held()) complete_request(rq, BlkStatus::ok);
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    EXPECT_EQ(t_.ended.load(), submitted_);
    EXPECT_EQ(t_.doubles.load(), 0);
  }

  std::unique_ptr<StubDriver> d_;
  BioTracker t_;
  std::vector<std::unique_ptr<BioTracker::Slot>> slots_;
  int submitted_ = 0;
  size_t completed_ = 0;  // requests completed through complete_held
};

inline uint16_t rt() { return ioprio_value(IoprioClass::rt, 0); }
inline uint16_t idle() { return ioprio_value(IoprioClass::idle, 0); }

}  // namespace blkmq::test

// Requeue and timeout injection with verified I/O under every scheduler
// (blktests block/015, /016, /017), and timeouts racing with the late
// completion of the same request. Each bio ends exactly once; afterwards
// no driver or scheduler tag, kyber token or in-flight count is left.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "blkmq/blkmq.h"
#include "support/stub_driver.h"
#include "support/verified_io.h"
#include "support/watchdog.h"

namespace blkmq::test {
namespace {

constexpr const char* kScheds[] = {"none", "mq-deadline", "kyber", "bfq"};

// block/015: 10 % of the requests are requeued by the driver.
TEST(FaultInjection, TenPercentRequeueUnderEveryScheduler) {
  Watchdog wd("requeue injection", std::chrono::seconds(240));
  for (const char* sched : kScheds) {
    auto dev = make_null_device({{"memory_backed", "1"}, {"irqmode", "1"}, {"submit_queues", "2"},
                                 {"requeue", "1,10,0,-1"}, {"hw_queue_depth", "16"},
                                 {"attr:queue/scheduler", sched}});
    ASSERT_TRUE(dev) << sched;
    IoTotals t;
    run_verified_workers(*dev, 4, 1.0 * stress_scale(), t, true);
    EXPECT_GT(t.submitted.load(), 200u) << sched;
    t.expect_clean();
    expect_queue_idle(dev->queue(), sched);
  }
}

// block/016, /017: the driver drops 5 % and then 50 % of the requests,
// which the timeout handler ends with timeout; the rest end ok.
TEST(FaultInjection, TimeoutInjectionUnderEveryScheduler) {
  Watchdog wd("timeout injection", std::chrono::seconds(240));
  for (const char* sched : kScheds) {
    for (const char* percent : {"5", "50"}) {
      auto dev = make_null_device({{"irqmode", "2"}, {"completion_nsec", "20000"},
                                   {"timeout_inject", std::string("1,") + percent + ",0,-1"},
                                   {"attr:queue/io_timeout", "30"}, {"attr:queue/scheduler", sched}});
      ASSERT_TRUE(dev) << sched;
      IoTotals t;
      run_verified_workers(*dev, 2, 0.6 * stress_scale(), t, false);
      SCOPED_TRACE(std::string(sched) + " at " + percent + " %");
      EXPECT_GT(t.timeouts.load(), 0u);
      EXPECT_GT(t.ended.load(), t.timeouts.load()) << "only timeouts: nothing completed";
      t.expect_clean(/*timeouts_ok=*/true);
      expect_queue_idle(dev->queue(), sched);
    }
  }
}

// The driver's completion lands when the request's timer fires (both at
// 20 ms), so the timeout handler and the completion race for the same
// request over and over: each bio still ends once, as ok (the completion
// won) or timeout (the handler did). Which one wins is the machine's
// timing: a loaded machine can make every race go one way (a late kblockd
// and the completion always won), so this run asserts no outcome; the
// tests below make each one certain.
TEST(FaultInjection, TimeoutRacingALateCompletionEndsTheRequestOnce) {
  Watchdog wd("timeout racing completion", std::chrono::seconds(180));
  for (const char* sched : kScheds) {
    auto dev = make_null_device({{"irqmode", "2"}, {"completion_nsec", "20000000"}, {"hw_queue_depth", "64"},
                                 {"attr:queue/io_timeout", "20"}, {"attr:queue/scheduler", sched}});
    ASSERT_TRUE(dev) << sched;
    IoTotals t;
    run_verified_workers(*dev, 2, 0.8 * stress_scale(), t, false);
    SCOPED_TRACE(sched);
    EXPECT_GT(t.ended.load(), 0u);
    t.expect_clean(/*timeouts_ok=*/true);
    expect_queue_idle(dev->queue(), sched);
  }
}

// A device like null's timer mode whose completions the test releases, on
// a ManualRuntime the test steps: the timeout handler cannot end a
// request, it marks the status the pending completion ends it with. The
// order of handler and completion is then the test's choice, not the
// machine's timing.
class HeldCompletions {
 public:
  enum class Order {
    handler_first,           // the handler marks timeout, the completion comes after
    completion_in_handler,   // the completion ends the request while the handler runs
  };
  struct Cmd {
    std::atomic<BlkStatus> status{BlkStatus::ok};
  };

  HeldCompletions(const char* sched, Order order) : order_(order) {
    ops_.queue_rq = &HeldCompletions::queue_rq;
    ops_.complete = [](Request* rq) { end_request(rq, rq->status); };
    ops_.timeout = &HeldCompletions::timeout;
    ops_.init_request = [](TagSet*, Request* rq, unsigned) {
      new (rq->pdu()) Cmd();
      return 0;
    };
    TagSetConfig c;
    c.ops = &ops_;
    c.queue_depth = 64;
    c.cmd_size = sizeof(Cmd);
    c.timeout_ms = 20;
    c.runtime = &rt_;
    set_ = std::move(TagSet::create(c).value());
    QueueConfig qc;
    qc.limits.capacity_sectors = 1 << 16;
    qc.queuedata = this;
    qc.scheduler = sched;
    q_ = std::move(Queue::create(*set_, qc).value());
  }
  ~HeldCompletions() {
    q_.reset();
    set_.reset();
  }
  Queue& q() { return *q_; }
  int handler_calls() const { return handler_calls_.load(); }

  // Moves the queue's clock past every deadline, runs the timeout scan,
  // then (handler_first) releases the completions of the requests the
  // handler marked; a request dispatched since waits for the next step.
  void step() {
    rt_.advance(100 * kNsPerMs);
    std::vector<Request*> marked;
    {
      std::lock_guard<std::mutex> g(mu_);
      for (auto it = held_.begin(); it != held_.end();) {
        if ((*it)->pdu_as<Cmd>()->status.load() == BlkStatus::timeout) {
          marked.push_back(*it);
          it = held_.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (Request* rq : marked) complete_request(rq, rq->pdu_as<Cmd>()->status.load());
    rt_.run_pending();
  }

 private:
  static constexpr uint64_t kNsPerMs = 1000000;
  static HeldCompletions* of(Request* rq) { return static_cast<HeldCompletions*>(queue_data(rq->q)); }

  static BlkStatus queue_rq(HwCtx*, const QueueData& bd) {
    bd.rq->pdu_as<Cmd>()->status.store(BlkStatus::ok);
    HeldCompletions* d = of(bd.rq);
    {
      // Held before it is in flight: the handler finds every request it sees.
      std::lock_guard<std::mutex> g(d->mu_);
      d->held_.push_back(bd.rq);
    }
    start_request(bd.rq);
    return BlkStatus::ok;
  }

  static TimeoutResult timeout(Request* rq) {
    HeldCompletions* d = of(rq);
    d->handler_calls_++;
    Cmd* cmd = rq->pdu_as<Cmd>();
    if (d->order_ == Order::completion_in_handler) {
      {
        std::lock_guard<std::mutex> g(d->mu_);
        d->held_.erase(std::find(d->held_.begin(), d->held_.end(), rq));
      }
      // The device's completion, on its own thread, takes the status
      // before the handler marks it: the request ends ok while the scan
      // still holds it.
      std::thread irq([rq, cmd] { EXPECT_TRUE(complete_request(rq, cmd->status.load())); });
      irq.join();
    }
    cmd->status.store(BlkStatus::timeout);
    return TimeoutResult::done;  // the pending completion ends it
  }

  Order order_;
  ManualRuntime rt_;  // outlives the tag set and queue
  DriverOps ops_;
  std::unique_ptr<TagSet> set_;
  std::unique_ptr<Queue> q_;
  std::mutex mu_;
  std::vector<Request*> held_;
  std::atomic<int> handler_calls_{0};
};

// Submits n writes to d's queue and steps it until every one ended; the
// status each ended with, or nothing if one ended twice or never.
std::vector<BlkStatus> run_held(HeldCompletions& d, unsigned n) {
  BioTracker t;
  std::vector<std::unique_ptr<BioTracker::Slot>> slots;
  for (unsigned i = 0; i < n; i++) {
    slots.push_back(t.make(ReqOp::write, uint64_t{i} * 8192, 4096));
    d.q().submit_bio(&slots.back()->bio);
  }
  for (int i = 0; i < 100 && t.ended.load() < static_cast<int>(n); i++) d.step();
  if (!t.wait_for(static_cast<int>(n)) || t.doubles.load() != 0) return {};
  std::vector<BlkStatus> st;
  for (const auto& s : slots) st.push_back(s->status);
  return st;
}

// Runs 32 writes under every scheduler with the given order of handler and
// completion: each bio ends once, with `want`, and the handler ran once for
// each request.
void expect_each_ends_once_with(HeldCompletions::Order order, BlkStatus want) {
  for (const char* sched : kScheds) {
    SCOPED_TRACE(sched);
    HeldCompletions d(sched, order);
    const auto st = run_held(d, 32);
    ASSERT_EQ(st.size(), 32u) << "a bio ended twice or never";
    EXPECT_EQ(std::count(st.begin(), st.end(), want), 32);
    EXPECT_EQ(d.handler_calls(), 32);
    expect_queue_idle(d.q(), sched);
  }
}

// The handler marks each request before its completion arrives: every
// bio ends once, with timeout.
TEST(FaultInjection, ALateCompletionAfterTheHandlerEndsWithTimeoutOnce) {
  Watchdog wd("handler first", std::chrono::seconds(120));
  expect_each_ends_once_with(HeldCompletions::Order::handler_first, BlkStatus::timeout);
}

// The completion ends each request while the handler runs (after the scan
// picked it up, before the handler marks it): every bio ends once, ok,
// and the handler's late mark changes nothing.
TEST(FaultInjection, ACompletionInsideTheHandlerEndsOkOnce) {
  Watchdog wd("completion in handler", std::chrono::seconds(120));
  expect_each_ends_once_with(HeldCompletions::Order::completion_in_handler, BlkStatus::ok);
}

}  // namespace
}  // namespace blkmq::test

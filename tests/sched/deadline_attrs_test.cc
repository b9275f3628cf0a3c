// mq-deadline tunables (kernel names, units and defaults; bad values
// refused) and switching the scheduler under I/O.
#include <random>

#include "base/lockstat.h"
#include "support/deadline_test_util.h"
#include "support/fifo_sched.h"

namespace blkmq::test {
namespace {

std::string get(Queue& q, const std::string& name) {
  auto v = q.attr("queue/iosched/" + name);
  return v ? *v : "<error: " + v.status().message() + ">";
}

StubDriver::Options deadline_opts(CompleteMode m = CompleteMode::inline_end) {
  StubDriver::Options o;
  o.scheduler = "mq-deadline";
  o.mode = m;
  return o;
}

TEST(DeadlineAttrs, KernelDefaults) {
  StubDriver d(deadline_opts());
  EXPECT_EQ(*d.q().attr("queue/scheduler"), "none [mq-deadline] kyber bfq");
  EXPECT_EQ(get(d.q(), "read_expire"), "500");
  EXPECT_EQ(get(d.q(), "write_expire"), "5000");
  EXPECT_EQ(get(d.q(), "writes_starved"), "2");
  EXPECT_EQ(get(d.q(), "front_merges"), "1");
  EXPECT_EQ(get(d.q(), "fifo_batch"), "16");
  EXPECT_EQ(get(d.q(), "prio_aging_expire"), "10000");
  EXPECT_EQ(get(d.q(), "insert_lists"), "split");
  EXPECT_EQ(*d.q().attr("queue/async_depth"), *d.q().attr("queue/nr_requests"));
}

// Regression (issue 10, mq-deadline starved writes): queue/async_depth keeps
// its share of nr_requests when nr_requests changes, as
// blk_mq_update_nr_requests scales it; it used to keep its old absolute
// value when nr_requests grew.
TEST(DeadlineAttrs, AsyncDepthKeepsItsShareWhenNrRequestsChanges) {
  StubDriver d(deadline_opts());
  ASSERT_TRUE(d.q().set_attr("queue/nr_requests", "8"));
  ASSERT_TRUE(d.q().set_attr("queue/nr_requests", "64"));
  EXPECT_EQ(*d.q().attr("queue/async_depth"), "64");  // no limit stays no limit
  ASSERT_TRUE(d.q().set_attr("queue/async_depth", "48"));
  ASSERT_TRUE(d.q().set_attr("queue/nr_requests", "128"));
  EXPECT_EQ(*d.q().attr("queue/async_depth"), "96");
  ASSERT_TRUE(d.q().set_attr("queue/nr_requests", "4"));
  EXPECT_EQ(*d.q().attr("queue/async_depth"), "3");
  ASSERT_TRUE(d.q().set_attr("queue/async_depth", "1"));
  ASSERT_TRUE(d.q().set_attr("queue/nr_requests", "5"));
  EXPECT_EQ(*d.q().attr("queue/async_depth"), "1");  // at least one
}

TEST(DeadlineAttrs, StoresValidValues) {
  StubDriver d(deadline_opts());
  const std::vector<std::pair<std::string, std::string>> ok = {
      {"read_expire", "250"},   {"write_expire", "0"},          {"writes_starved", "-3"},
      {"front_merges", "0"},    {"fifo_batch", "1"},            {"prio_aging_expire", "2147483647"},
      {"insert_lists", "locked"}, {"insert_lists", "split"},    {"writes_starved", "2147483647"},
  };
  for (const auto& [name, value] : ok) {
    ASSERT_TRUE(d.q().set_attr("queue/iosched/" + name, value)) << name << "=" << value;
    EXPECT_EQ(get(d.q(), name), value);
  }
}

TEST(DeadlineAttrs, RefusesBadValuesAndKeepsTheOldOne) {
  StubDriver d(deadline_opts());
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"read_expire", "-1"},      {"read_expire", "abc"},       {"read_expire", ""},
      {"write_expire", "2147483648"}, {"writes_starved", "1x"},  {"front_merges", "2"},
      {"front_merges", "-1"},     {"fifo_batch", "-5"},         {"prio_aging_expire", "1.5"},
      {"insert_lists", "both"},   {"writes_starved", "99999999999"},
  };
  for (const auto& [name, value] : bad) {
    const std::string before = get(d.q(), name);
    Status s = d.q().set_attr("queue/iosched/" + name, value);
    EXPECT_FALSE(s) << name << "=" << value;
    EXPECT_NE(s.message().find(name), std::string::npos) << s.message();
    EXPECT_EQ(get(d.q(), name), before);
  }
}

TEST(DeadlineAttrs, ListedOnlyWhileMqDeadlineRuns) {
  StubDriver d(deadline_opts());
  auto names = d.q().attr_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "queue/iosched/fifo_batch"), names.end());
  ASSERT_TRUE(d.q().set_attr("queue/scheduler", "none"));
  names = d.q().attr_names();
  EXPECT_EQ(std::find(names.begin(), names.end(), "queue/iosched/fifo_batch"), names.end());
}

// queue/iosched/lock_stat and insert_lock_stat (seed 003's contention
// numbers): I/O takes the main lock, "0" resets, any other value is refused.
// "deadline" selects mq-deadline, as the kernel's elevator_alias does (a
// user of the legacy scheduler's name was refused: issue 27), and the list
// still shows the one name.
TEST(DeadlineAttrs, DeadlineIsAnAliasOfMqDeadline) {
  StubDriver::Options o = deadline_opts();
  o.scheduler = "none";
  StubDriver d(o);
  ASSERT_TRUE(d.q().set_attr("queue/scheduler", "deadline"));
  EXPECT_EQ(*d.q().attr("queue/scheduler"), "none [mq-deadline] kyber bfq");
  EXPECT_EQ(get(d.q(), "read_expire"), "500");
  // Switching to the alias of the running scheduler keeps it (no re-init).
  ASSERT_TRUE(d.q().set_attr("queue/iosched/read_expire", "250"));
  ASSERT_TRUE(d.q().set_attr("queue/scheduler", "deadline\n"));
  EXPECT_EQ(get(d.q(), "read_expire"), "250");
}

// An alias that names a registered scheduler, or a name that is another's
// alias, is refused at registration.
TEST(DeadlineAttrs, AnAliasCannotShadowAnotherScheduler) {
  (void)registered_elevators();  // the built-in ones are in
  static ElevatorType named_as_alias = fifo_elevator("deadline");
  EXPECT_FALSE(register_elevator(&named_as_alias));
  static ElevatorType alias_of_another = fifo_elevator("alias-test-fifo");
  alias_of_another.alias = "kyber";
  EXPECT_FALSE(register_elevator(&alias_of_another));
  alias_of_another.alias = "deadline";
  EXPECT_FALSE(register_elevator(&alias_of_another));
}

TEST(DeadlineAttrs, LockStatCountsAndResets) {
  for (const char* name : {"lock_stat", "insert_lock_stat"}) {
    StubDriver d(deadline_opts());
    EXPECT_EQ(get(d.q(), name), "acquired=0 waited=0 wait_ns=0 try_busy=0 hold_samples=0 hold_ns=0") << name;
  }
  StubDriver d(deadline_opts());
  char buf[4096];
  for (int i = 0; i < 8; i++) ASSERT_EQ(d.q().read_sync(buf, static_cast<uint64_t>(i) << 20, sizeof buf), BlkStatus::ok);
  base::LockStat s;
  ASSERT_TRUE(base::LockStat::parse(get(d.q(), "lock_stat"), &s)) << get(d.q(), "lock_stat");
  EXPECT_GE(s.acquired, 8u);  // at least one insert or dispatch per read
  Status bad = d.q().set_attr("queue/iosched/lock_stat", "1");
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("only 0"), std::string::npos);
  ASSERT_TRUE(d.q().set_attr("queue/iosched/lock_stat", "0"));
  EXPECT_EQ(get(d.q(), "lock_stat"), "acquired=0 waited=0 wait_ns=0 try_busy=0 hold_samples=0 hold_ns=0");
}

// Writers and readers keep going while the scheduler flips between none and
// mq-deadline (and its insertion mode flips): every bio ends exactly once,
// with its data intact.
void switch_under_io(const char* mode) {
  StubDriver d(deadline_opts(CompleteMode::irq_thread));
  BioTracker t;
  constexpr int kThreads = 4, kBios = 400;
  std::vector<std::vector<std::unique_ptr<BioTracker::Slot>>> slots(kThreads);
  std::atomic<bool> go{true};
  std::vector<std::thread> th;
  for (int w = 0; w < kThreads; w++)
    th.emplace_back([&, w] {
      std::mt19937 rng(w);
      for (int i = 0; i < kBios; i++) {
        // Reads and writes use separate halves and writes never overlap:
        // overlapping concurrent writes would race on the stub's memory.
        const ReqOp op = rng() % 3 ? ReqOp::write : ReqOp::read;
        const bool seq = op == ReqOp::write || rng() % 2;
        const uint64_t half = op == ReqOp::read ? 1u << 21 : 0;
        const uint64_t off = (uint64_t(w) << 22) + half + (seq ? uint64_t(i) * 4096 : (rng() % 512) * 4096);
        slots[w].push_back(t.make(op, off, 4096, 0, uint8_t(i)));
        slots[w].back()->bio.ioprio = ioprio_value(static_cast<IoprioClass>(rng() % 4), 0);
        d.q().submit_bio(&slots[w].back()->bio);
      }
    });
  std::thread switcher([&] {
    for (int i = 0; i < 20 && go.load(); i++) {
      EXPECT_TRUE(d.q().set_attr("queue/scheduler", i % 2 ? "mq-deadline" : "none"));
      if (i % 2) {
        EXPECT_TRUE(d.q().set_attr("queue/iosched/insert_lists", mode));
      }
      // Some I/O ends under each setting before the next (or all has).
      const int seen = t.ended.load();
      eventually([&] { return t.ended.load() >= seen + 16 || !go.load(); });
    }
  });
  for (auto& x : th) x.join();
  go.store(false);
  switcher.join();
  ASSERT_TRUE(t.wait_for(kThreads * kBios, 60000));
  EXPECT_EQ(t.ended.load(), kThreads * kBios);
  EXPECT_EQ(t.doubles.load(), 0);
  EXPECT_EQ(t.errors.load(), 0);
  ASSERT_TRUE(d.q().set_attr("queue/scheduler", "mq-deadline"));
  EXPECT_TRUE(wait_requests_freed(d.q()));
}

TEST(DeadlineSwitch, SwitchingUnderIoLosesNothingLocked) { switch_under_io("locked"); }
TEST(DeadlineSwitch, SwitchingUnderIoLosesNothingSplit) { switch_under_io("split"); }

// Concurrent readers and writers through mq-deadline with both insertion
// modes: nothing is lost, the level counters balance once idle.
TEST(DeadlineSwitch, ConcurrentIoBalancesCounters) {
  for (const char* mode : {"locked", "split"}) {
    StubDriver d(deadline_opts(CompleteMode::irq_thread));
    ASSERT_TRUE(d.q().set_attr("queue/nr_requests", "16"));
    ASSERT_TRUE(d.q().set_attr("queue/iosched/insert_lists", mode));
    BioTracker t;
    constexpr int kThreads = 6, kBios = 300;
    std::vector<std::vector<std::unique_ptr<BioTracker::Slot>>> slots(kThreads);
    std::vector<std::thread> th;
    for (int w = 0; w < kThreads; w++)
      th.emplace_back([&, w] {
        for (int i = 0; i < kBios; i++) {
          slots[w].push_back(t.make(w % 2 ? ReqOp::read : ReqOp::write, (uint64_t(w) << 22) + uint64_t(i) * 4096, 4096));
          slots[w].back()->bio.ioprio = ioprio_value(static_cast<IoprioClass>(w % 4), 0);
          d.q().submit_bio(&slots[w].back()->bio);
        }
      });
    for (auto& x : th) x.join();
    ASSERT_TRUE(t.wait_for(kThreads * kBios, 60000));
    ASSERT_TRUE(wait_requests_freed(d.q()));
    DeadlineStats st = deadline_stats(&d.q());
    for (const auto& l : st.level) {
      EXPECT_EQ(l.inserted, l.completed) << mode;
      EXPECT_EQ(l.dispatched + l.merged, l.inserted) << mode;
    }
  }
}

}  // namespace
}  // namespace blkmq::test

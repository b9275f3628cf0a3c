// io.latency (src/qos/iolatency.cc): the figure on a ManualRuntime
// (a protected group missing its target makes a saturating peer's depth
// halve per scale event, 64 -> 32 -> ... -> 1, until the protected group
// meets it), the recovery back to unlimited, the file's format, and a
// threaded run with targets changing while I/O runs and the queue goes.
//
// The device is simulated: requests wait in the test's list with a due
// time from a latency model, and the test ends them when the manual clock
// reaches it. The protected group submits from the test's thread (it is
// never throttled); the peer submits from its own thread, because
// throttle puts it to sleep, and each step waits until that thread is
// parked (all its bios out) or asleep in io.latency's throttle.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "blkmq/blkmq.h"
#include "core/core.h"
#include "qos/blkcg.h"
#include "qos/iolatency.h"
#include "qos/rq_qos.h"
#include "support/stub_driver.h"
#include "support/wait.h"
#include "support/watchdog.h"

namespace blkmq::test {
namespace {

constexpr uint64_t kUs = 1000, kMs = 1000 * kUs;

IolatencyInfo info(Queue& q, const std::string& path) {
  IolatencyInfo i;
  EXPECT_TRUE(iolatency_info(&q, path, &i).ok());
  return i;
}

// Whether io.latency is on q's chain (wbt may be there too: it is on by
// default).
bool has_iolatency(Queue& q) {
  const std::vector<std::string> v = rq_qos_list(&q);
  return std::find(v.begin(), v.end(), "latency") != v.end();
}

IoGroup* group(const std::string& path) {
  auto g = io_group_create(path);
  EXPECT_TRUE(g.ok());
  return g.ok() ? *g : nullptr;
}

// A closed-loop submitter on its own thread: keeps `want` bios out in
// group `g`, sleeping in throttle when io.latency says so.
class Peer {
 public:
  Peer(Queue& q, IoGroup* g, unsigned want) : q_(q), g_(g), want_(want), slots_(want) {
    for (unsigned i = 0; i < want; i++) {
      slots_[i].peer = this;
      slots_[i].bio.op = ReqOp::read;
      slots_[i].bio.size = 4096;
      slots_[i].v = iovec{slots_[i].buf, 4096};
      slots_[i].bio.vec = &slots_[i].v;
      slots_[i].bio.nr_vecs = 1;
      slots_[i].bio.sector = uint64_t(i) * 8;
      slots_[i].bio.end_io = &Peer::end_io;
      slots_[i].bio.private_data = &slots_[i];
      free_.push_back(&slots_[i]);
    }
    t_ = std::thread([this] { run(); });
  }
  ~Peer() { EXPECT_FALSE(t_.joinable()) << "stop() the peer first"; }

  // Parked with all its bios out, or asleep in io.latency's throttle.
  bool settled(const IolatencyInfo& i) {
    std::lock_guard<std::mutex> l(mu_);
    return done_ || (parked_ && free_.empty()) || i.waiting > 0;
  }
  // Ends the thread once `end_all` has let every bio through.
  void stop(const std::function<void()>& end_all) {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    while (!eventually([&] { return finished(); }, 1)) end_all();
    t_.join();
  }
  bool finished() {
    std::lock_guard<std::mutex> l(mu_);
    return done_ && free_.size() == want_;
  }
  uint64_t submitted() {
    std::lock_guard<std::mutex> l(mu_);
    return submitted_;
  }
  uint64_t ended() {
    std::lock_guard<std::mutex> l(mu_);
    return ended_;
  }
  int doubles() const { return doubles_.load(); }

 private:
  struct Slot {
    Bio bio;
    iovec v;
    uint8_t buf[4096];
    Peer* peer = nullptr;
    bool out = false;
  };

  static void end_io(Bio* b) {
    auto* s = static_cast<Slot*>(b->private_data);
    Peer* p = s->peer;
    std::lock_guard<std::mutex> l(p->mu_);
    if (!s->out) p->doubles_.fetch_add(1);
    s->out = false;
    p->free_.push_back(s);
    p->ended_++;
    p->cv_.notify_all();
  }

  void run() {
    EXPECT_TRUE(io_context_set_group(current_io_context(), g_).ok());
    for (;;) {
      Slot* s;
      {
        std::unique_lock<std::mutex> l(mu_);
        parked_ = true;
        cv_.wait(l, [&] { return stop_ || !free_.empty(); });
        parked_ = false;
        if (stop_) break;
        s = free_.back();
        free_.pop_back();
        s->out = true;
        submitted_++;
      }
      bio_reinit(&s->bio);
      q_.submit_bio(&s->bio);
    }
    EXPECT_TRUE(io_context_set_group(current_io_context(), nullptr).ok());
    std::lock_guard<std::mutex> l(mu_);
    done_ = true;
  }

  Queue& q_;
  IoGroup* g_;
  const unsigned want_;
  std::vector<Slot> slots_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Slot*> free_;
  bool parked_ = false, stop_ = false, done_ = false;
  uint64_t submitted_ = 0, ended_ = 0;
  std::atomic<int> doubles_{0};
  std::thread t_;
};

// Latency of a request reaching the device: protected or not, and how
// many requests the device holds with it.
using Model = std::function<uint64_t(bool prot, size_t inflight)>;

// The simulated device and the protected group's QD1 submitter.
class Sim {
 public:
  static constexpr unsigned kDepth = 64;     // tags and nr_requests
  static constexpr unsigned kPeerWant = 62;  // the peer never waits for a tag
  static constexpr uint64_t kTarget = 2 * kMs;

  // rotational: the device's queue/rotational, which makes a window miss
  // by its mean latency rather than by the share of bios that missed.
  explicit Sim(const std::string& root, bool rotational = false)
      : prot_path_(root + "/prot"), peer_path_(root + "/peer") {
    StubDriver::Options o;
    o.mode = CompleteMode::never;
    o.runtime = &rt_;
    o.depth = kDepth;
    o.rotational = rotational;
    d_ = std::make_unique<StubDriver>(o);
    prot_ioc_ = acquire_io_context();
    EXPECT_TRUE(io_context_set_group(prot_ioc_, group(prot_path_)).ok());
    EXPECT_TRUE(q().set_attr("cgroup" + prot_path_ + "/io.latency", "target=2000").ok());
    peer_ = std::make_unique<Peer>(q(), group(peer_path_), kPeerWant);
    prot_bio_.op = ReqOp::read;
    prot_bio_.size = 4096;
    prot_v_ = iovec{prot_buf_, 4096};
    prot_bio_.vec = &prot_v_;
    prot_bio_.nr_vecs = 1;
    prot_bio_.sector = 1 << 16;  // 32 MiB in, apart from the peer
    prot_bio_.ioc = prot_ioc_;
    prot_bio_.private_data = this;
    prot_bio_.end_io = [](Bio* b) {
      auto* s = static_cast<Sim*>(b->private_data);
      s->prot_out_ = false;
      s->prot_ended_++;
      s->prot_next_ = s->now() + s->prot_think_ns_;
    };
  }
  ~Sim() {
    peer_->stop([&] { end_all(); });
    end_all();
    EXPECT_EQ(peer_->doubles(), 0);
    EXPECT_EQ(peer_->submitted(), peer_->ended()) << "every peer bio ends exactly once";
    EXPECT_EQ(prot_submitted_, prot_ended_);
    d_.reset();
    EXPECT_TRUE(io_context_set_group(prot_ioc_, nullptr).ok());
    release_io_context(prot_ioc_);
  }

  Queue& q() { return d_->q(); }
  uint64_t now() { return q().now_ns(); }
  IolatencyInfo peer_info() { return info(q(), peer_path_); }
  IolatencyInfo prot_info() { return info(q(), prot_path_); }
  void set_model(Model m) { model_ = std::move(m); }
  // The protected group waits this long after each bio before the next
  // (0: at once): fewer steps where many samples are not the point.
  void set_think(uint64_t ns) { prot_think_ns_ = ns; }
  // The grid the peer's requests end on.
  void set_peer_grid(uint64_t ns) { peer_grid_ns_ = ns; }
  uint64_t tags_busy() { return std::stoull(*q().attr("mq/0/tags_busy")); }

  // One step: everyone settles, the protected group resubmits, the clock
  // goes to the next due request and what is due ends. Returns false if
  // the peer did not settle (a hang: the test fails).
  bool step() {
    if (!settle()) return false;
    if (!prot_out_ && now() >= prot_next_) {
      prot_out_ = true;
      prot_submitted_++;
      bio_reinit(&prot_bio_);
      q().submit_bio(&prot_bio_);
    }
    collect();
    uint64_t next = UINT64_MAX;
    for (const Held& h : dev_) next = std::min(next, h.due);
    if (!prot_out_) next = std::min(next, prot_next_);
    if (next == UINT64_MAX) return false;
    if (next > now()) rt_.advance(next - now());
    finish_due();
    return true;
  }
  // Steps until the clock passes `until` or stop() says so.
  bool run_until(uint64_t until, const std::function<bool()>& stop = [] { return false; }) {
    while (now() < until && !stop())
      if (!step()) return false;
    return true;
  }
  // Whether a bio asleep in throttle holds a tag: every allocated tag is
  // a request the device holds.
  bool no_tag_held_by_sleepers() { return tags_busy() == dev_.size(); }
  unsigned peer_waiting_seen() const { return waiting_seen_; }
  void end_all() {
    collect();
    for (const Held& h : std::exchange(dev_, {})) end_request(h.rq, BlkStatus::ok);
    rt_.run_pending();
  }

 private:
  struct Held {
    Request* rq;
    uint64_t due;
  };

  bool settle() {
    const bool ok = eventually([&] { return peer_->settled(peer_info()); });
    const IolatencyInfo i = peer_info();
    if (i.waiting) {
      collect();
      waiting_seen_++;
      EXPECT_TRUE(no_tag_held_by_sleepers()) << tags_busy() << " tags, " << dev_.size() << " at the device";
    }
    return ok;
  }
  void collect() {
    rt_.run_pending();
    for (Request* rq : d_->take_held()) {
      const bool prot = rq->bio && rq->bio->ioc == prot_ioc_;
      dev_.push_back({rq, 0});
      uint64_t due = now() + model_(prot, dev_.size());
      // The peer's requests end on a grid (10 ms unless set): fewer
      // steps, each a hand-off to its thread.
      if (!prot) due = (due + peer_grid_ns_ - 1) / peer_grid_ns_ * peer_grid_ns_;
      dev_.back().due = due;
    }
  }
  void finish_due() {
    std::stable_sort(dev_.begin(), dev_.end(), [](const Held& a, const Held& b) { return a.due < b.due; });
    size_t n = 0;
    while (n < dev_.size() && dev_[n].due <= now()) n++;
    std::vector<Held> due(dev_.begin(), dev_.begin() + n);
    dev_.erase(dev_.begin(), dev_.begin() + n);
    for (const Held& h : due) end_request(h.rq, BlkStatus::ok);
    rt_.run_pending();
  }

  ManualRuntime rt_;
  std::unique_ptr<StubDriver> d_;
  std::string prot_path_, peer_path_;
  IoContext* prot_ioc_ = nullptr;
  std::unique_ptr<Peer> peer_;
  Model model_ = [](bool, size_t n) { return 800 * kUs * n; };
  std::vector<Held> dev_;
  Bio prot_bio_;
  iovec prot_v_;
  uint8_t prot_buf_[4096];
  bool prot_out_ = false;
  uint64_t prot_think_ns_ = 0, prot_next_ = 0;
  uint64_t peer_grid_ns_ = 10 * kMs;
  uint64_t prot_submitted_ = 0, prot_ended_ = 0;
  unsigned waiting_seen_ = 0;
};

struct DepthChange {
  uint64_t at_ns;
  unsigned depth;
};

// Runs the figure's first part: the device's latency is 0.8 ms per
// request it holds, so the protected group (QD1, 2 ms target) misses
// until the peer is down to one request. Stops there (or after 6 s).
// Returns the peer's depths and when they changed.
std::vector<DepthChange> drive_down(Sim& s) {
  std::vector<DepthChange> seen{{s.now(), s.peer_info().max_depth}};
  EXPECT_TRUE(s.run_until(s.now() + 6000 * kMs, [&] {
    const unsigned d = s.peer_info().max_depth;
    if (d != seen.back().depth) seen.push_back({s.now(), d});
    return d == 1;
  })) << "the peer did not settle";
  return seen;
}

// The figure: the peer's depth halves once per scale event (at
// most one per 500 ms), 64 (the queue depth, from unlimited) -> 32 -> 16
// -> 8 -> 4 -> 2 -> 1, and at depth 1 the protected group meets its
// target: under 10 % of its bios miss, where all did at the start. After
// 500 ms of good windows the kernel's algorithm probes upwards (+4, a
// sixteenth of the queue depth), misses and halves again: the peer stays
// at 5 or below. The same on a non-rotational device (a window misses when
// a tenth of its bios did) and a rotational one (when their mean did).
class IoLatencyFigure : public ::testing::TestWithParam<bool> {};


TEST_P(IoLatencyFigure, APeerOfAGroupMissingItsTargetHalvesPerScaleEvent) {
  Watchdog w("IoLatencyFigure.APeerOfAGroupMissingItsTargetHalvesPerScaleEvent", std::chrono::seconds(60));
  Sim s("/iolat-fig", GetParam());
  ASSERT_TRUE(has_iolatency(s.q())) << "the first target adds the policy";
  struct Bucket {
    uint64_t samples = 0, missed = 0;
  };
  std::map<unsigned, Bucket> by_depth;  // the protected group's bios, by the peer's depth
  IolatencyInfo last = s.prot_info();
  auto account = [&] {
    const IolatencyInfo now = s.prot_info();
    Bucket& b = by_depth[s.peer_info().max_depth];
    b.samples += now.samples - last.samples;
    b.missed += now.missed - last.missed;
    last = now;
  };
  std::vector<DepthChange> seen{{s.now(), s.peer_info().max_depth}};
  ASSERT_TRUE(s.run_until(s.now() + 6000 * kMs, [&] {
    account();
    const unsigned d = s.peer_info().max_depth;
    if (d != seen.back().depth) seen.push_back({s.now(), d});
    return d == 1;
  }));
  std::vector<unsigned> depths;
  for (const DepthChange& c : seen) depths.push_back(c.depth);
  EXPECT_EQ(depths, (std::vector<unsigned>{UINT_MAX, 32, 16, 8, 4, 2, 1}));
  // The events are 500 ms apart; the peer sees each at its next bio.
  for (size_t i = 2; i < seen.size(); i++)
    EXPECT_GE(seen[i].at_ns - seen[i - 1].at_ns, 450 * kMs) << "scale events of one parent are 500 ms apart";
  EXPECT_GT(s.peer_waiting_seen(), 0u) << "the peer slept in throttle";
  unsigned highest = 1;
  ASSERT_TRUE(s.run_until(s.now() + 3000 * kMs, [&] {
    account();
    highest = std::max(highest, s.peer_info().max_depth);
    return false;
  }));
  EXPECT_LE(highest, 5u) << "probing moves up by 64/16 and halves back";
  const Bucket deep = by_depth[UINT_MAX], one = by_depth[1];
  ASSERT_GT(deep.samples, 0u);
  EXPECT_EQ(deep.missed, deep.samples) << "every protected bio missed beside the unlimited peer";
  ASSERT_GT(one.samples, 100u);
  EXPECT_LT(one.missed * 10, one.samples)
      << one.missed << " of " << one.samples << " missed beside the peer at depth 1";
  EXPECT_EQ(s.prot_info().max_depth, UINT_MAX) << "the protected group itself is never scaled";
}

INSTANTIATE_TEST_SUITE_P(Devices, IoLatencyFigure, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "rotational" : "ssd"; });

// Recovery: once the protected group's windows pass without misses, it
// raises the cookie every 500 ms (by one while more than a queue depth
// below the default, then by a sixteenth of it) and the peer steps its
// depth up by 4 (64/16) to 64, then to unlimited with the default cookie.
TEST(IoLatency, WhenMissesStopThePeerScalesBackToUnlimited) {
  Watchdog w("IoLatency.WhenMissesStopThePeerScalesBackToUnlimited", std::chrono::seconds(60));
  Sim s("/iolat-up");
  drive_down(s);
  ASSERT_EQ(s.peer_info().max_depth, 1u);
  // A fast device for the protected group; the peer's requests are slow,
  // so it does few of them.
  s.set_model([](bool prot, size_t) { return prot ? 1500 * kUs : 100 * kMs; });
  s.set_think(8500 * kUs);  // a protected bio every 10 ms: 10 a window, enough
  s.set_peer_grid(50 * kMs);
  const IolatencyInfo before = s.prot_info();
  std::vector<unsigned> depths{1};
  ASSERT_TRUE(s.run_until(s.now() + 30000 * kMs, [&] {
    const unsigned d = s.peer_info().max_depth;
    if (d != depths.back()) depths.push_back(d);
    return d == UINT_MAX;
  }));
  ASSERT_EQ(depths.back(), UINT_MAX) << "back to unlimited";
  EXPECT_TRUE(std::is_sorted(depths.begin(), depths.end())) << "only up";
  EXPECT_EQ(depths[1], 5u) << "up by a sixteenth of the queue depth";
  EXPECT_EQ(depths[depths.size() - 2], Sim::kDepth) << "the queue depth before unlimited";
  const IolatencyInfo after = s.prot_info();
  EXPECT_LE(after.missed - before.missed, 1u) << "no misses while it recovered (but the bio in flight at the switch)";
  EXPECT_EQ(s.peer_info().scale_cookie, 1000000u) << "the default cookie";
}

// The file: round trip, the MAJ:MIN prefix, max and 0 removing the
// target, errors that change nothing, the root's absence, the listing,
// and the policy added by the first target only.
TEST(IoLatency, TheFileFormatAndThePolicyAddedOnFirstTarget) {
  StubDriver d(StubDriver::Options{});
  Queue& q = d.q();
  const std::string f = "cgroup/iolat-file/a/io.latency";
  ASSERT_TRUE(io_group_create("/iolat-file").ok());
  EXPECT_TRUE(q.set_attr(f, "target=max").ok()) << "removing nothing is fine";
  EXPECT_FALSE(has_iolatency(q)) << "no target, no policy";
  ASSERT_TRUE(q.set_attr(f, "target=2500\n").ok()) << "what echo writes; the group is made";
  EXPECT_TRUE(has_iolatency(q));
  const std::string dev = std::to_string(Queue::kDevMajor) + ":" + std::to_string(q.dev_minor());
  EXPECT_EQ(*q.attr(f), dev + " target=2500");
  EXPECT_EQ(info(q, "/iolat-file/a").window_ns, 100 * kMs) << "2.5 ms x 16 is under the 100 ms floor";
  ASSERT_TRUE(q.set_attr(f, "8:16 target=100000").ok()) << "a MAJ:MIN prefix is accepted and ignored";
  EXPECT_EQ(*q.attr(f), dev + " target=100000");
  EXPECT_EQ(info(q, "/iolat-file/a").window_ns, 1000 * kMs) << "100 ms x 16 is over the 1 s ceiling";
  for (const char* bad : {"", "target=", "target=-1", "target=1.5", "target=2ms", "latency=5", "target=5 x=1",
                          "8:16", "a:b target=5", "8:-1 target=5", "target=99999999999999999999"}) {
    const Status st = q.set_attr(f, bad);
    EXPECT_EQ(st.code(), EINVAL) << "'" << bad << "'";
    EXPECT_NE(st.message().find("io.latency"), std::string::npos) << st.message();
  }
  EXPECT_EQ(*q.attr(f), dev + " target=100000") << "errors change nothing";
  ASSERT_TRUE(q.set_attr(f, "8:16  target=100001").ok()) << "blanks after MAJ:MIN, as the kernel skips them";
  EXPECT_EQ(*q.attr(f), dev + " target=100001");
  ASSERT_TRUE(q.set_attr(f, "target=0").ok());
  EXPECT_EQ(*q.attr(f), "");
  ASSERT_TRUE(q.set_attr(f, dev + " target=7").ok());
  ASSERT_TRUE(q.set_attr(f, "target=max").ok());
  EXPECT_EQ(*q.attr(f), "");
  EXPECT_EQ(q.set_attr("cgroup/io.latency", "target=5").code(), EINVAL) << "the root has none";
  EXPECT_EQ(q.attr("cgroup/iolat-file/nope/io.latency").status().code(), ENOENT);
  const auto names = q.attr_names();
  EXPECT_NE(std::find(names.begin(), names.end(), f), names.end());
  EXPECT_EQ(std::find(names.begin(), names.end(), "cgroup/io.latency"), names.end());
  EXPECT_TRUE(io_group_remove("/iolat-file/a").ok());
  EXPECT_TRUE(io_group_remove("/iolat-file").ok());
}

// A submitter of the threaded test: its tracker and its bios in flight
// outlive its thread, so the queue goes with its last round in flight.
struct RoundSubmitter {
  static constexpr int kRound = 16;
  BioTracker t;
  std::vector<std::unique_ptr<BioTracker::Slot>> prev, cur;
  int submitted = 0;  // read once its thread is joined

  // Rounds of kRound writes in `path`, each after the rounds before the
  // last ended, until `enough` (and at least 4).
  void run(Queue& q, const std::string& path, unsigned id, const std::atomic<bool>& enough) {
    EXPECT_TRUE(io_context_set_group(current_io_context(), group(path)).ok());
    for (int r = 0; !enough.load() || r < 4; r++) {
      for (int n = 0; n < kRound; n++) {
        cur.push_back(t.make(ReqOp::write, (uint64_t(id) << 24) + (uint64_t(n) << 12), 4096));
        q.submit_bio(&cur.back()->bio);
      }
      submitted += kRound;
      EXPECT_TRUE(t.wait_for(r * kRound)) << "the rounds before this one";
      prev = std::exchange(cur, {});
    }
    EXPECT_TRUE(io_context_set_group(current_io_context(), nullptr).ok());
  }
};

// Sets and removes /iolat-mt/c/d's target and reads every group's file
// until `stop`; sets `scaled` once /iolat-mt/b's depth was cut.
void churn_targets(Queue& q, const std::vector<std::string>& paths, const std::atomic<bool>& stop,
                   std::atomic<bool>& scaled) {
  for (unsigned i = 0; !stop.load(); i++) {
    const std::string v = i % 3 ? "target=" + std::to_string(i % 50) : "target=max";
    EXPECT_TRUE(q.set_attr("cgroup/iolat-mt/c/d/io.latency", v).ok());
    for (const std::string& p : paths) (void)q.attr("cgroup" + p + "/io.latency");
    IolatencyInfo b;
    if (iolatency_info(&q, "/iolat-mt/b", &b).ok() && b.max_depth < UINT_MAX) scaled.store(true);
    std::this_thread::yield();
  }
}

// Real threads: /a has a 1 us target it always misses on the stub's
// irq-thread completions, so its peers /b and /c are scaled down (their
// submitters sleep in throttle), while another thread sets and removes
// /c/d's target (below /c: its own parent's scaling) and reads every
// file. Runs until /b was seen scaled (windows are 100 ms of real time),
// then the queue is torn down with each submitter's last round still in
// flight. Every bio ends exactly once; bounded by a watchdog.
TEST(IoLatencyConcurrency, TargetsChangeWhileIoRunsAndTheQueueGoes) {
  Watchdog w("IoLatencyConcurrency.TargetsChangeWhileIoRunsAndTheQueueGoes", std::chrono::seconds(120));
  StubDriver::Options o;
  o.mode = CompleteMode::irq_thread;
  o.depth = 16;
  auto d = std::make_unique<StubDriver>(o);
  Queue& q = d->q();
  const std::vector<std::string> paths = {"/iolat-mt/a", "/iolat-mt/b", "/iolat-mt/c/d"};
  ASSERT_TRUE(q.set_attr("cgroup/iolat-mt/a/io.latency", "target=1").ok());
  std::atomic<bool> stop{false}, scaled{false};
  std::thread conf([&] { churn_targets(q, paths, stop, scaled); });
  std::vector<std::unique_ptr<RoundSubmitter>> subs;
  for (size_t i = 0; i < paths.size(); i++) subs.push_back(std::make_unique<RoundSubmitter>());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < paths.size(); i++)
    threads.emplace_back([&, i] { subs[i]->run(q, paths[i], unsigned(i), scaled); });
  for (std::thread& th : threads) th.join();
  stop.store(true);
  conf.join();
  d.reset();  // teardown waits for every bio still in flight
  EXPECT_TRUE(scaled.load());
  for (auto& sub : subs) {
    ASSERT_TRUE(sub->t.wait_for(sub->submitted));
    EXPECT_EQ(sub->t.ended.load(), sub->submitted) << "every bio ended";
    EXPECT_EQ(sub->t.doubles.load(), 0) << "and only once";
    EXPECT_EQ(sub->t.errors.load(), 0);
  }
  for (const char* p : {"/iolat-mt/c/d", "/iolat-mt/c", "/iolat-mt/b", "/iolat-mt/a", "/iolat-mt"})
    EXPECT_TRUE(io_group_remove(p).ok()) << p;
}

}  // namespace
}  // namespace blkmq::test

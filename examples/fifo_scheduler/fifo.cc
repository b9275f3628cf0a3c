// An out-of-tree I/O scheduler, built against an installed blkmq.
//
// What it shows: a scheduler is an ElevatorType (blkmq/elevator/
// elevator.h): five required hooks (init_sched, exit_sched,
// insert_requests, dispatch_request, has_work) plus whichever optional ones
// it wants; here bio_merge and requests_merged, so that bios and requests
// merge in its queue through the core's helpers, and one read-only tunable
// under queue/iosched/. "fifo-example" dispatches in arrival order, one
// queue for all hw queues. Registered with register_elevator, it is a
// value of queue/scheduler like mq-deadline, and is switched to and away
// from while I/O runs.
//
// What it checks (exit status 0 when all hold): while writer threads
// write and read back a memory-backed null device, the queue switches
// between fifo-example and the built-in schedulers; in every fifo-example
// phase requests went through its hooks (its own counters grew); at the
// end every request it took in left it (dispatched or merged away), the
// queue was empty whenever it was torn down, and all data reads back.
#include <blkmq/blkmq.h>
#include <blkmq/elevator/elevator.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using blkmq::BlkStatus;
using blkmq::ListNode;
using blkmq::Request;

// ---- the scheduler ----

// Counters over every instance (the checks read them after the scheduler
// was switched away and its per-queue state freed).
struct FifoStats {
  std::atomic<uint64_t> inserted{0};    // requests queued here
  std::atomic<uint64_t> dispatched{0};  // requests handed to the driver
  std::atomic<uint64_t> absorbed{0};    // queued requests merged into another
  std::atomic<uint64_t> bio_merges{0};  // bios merged into a queued request
  std::atomic<uint64_t> exits_not_empty{0};
} g_stats;

// Per-queue state. One FIFO for the whole queue (queue_wide below): a run
// of any hw queue may hand out a request of another, as the elevator
// contract allows. `lock` also covers the core's merge hash (the merge
// helpers' rule).
struct FifoQueue {
  std::mutex lock;
  ListNode fifo;                      // through Request::queuelist
  std::atomic<unsigned> queued{0};    // has_work reads it without the lock
  std::atomic<uint64_t> dispatched{0};  // this instance's, for queue/iosched/dispatched
  blkmq::ElevatorQueue* eq = nullptr;
};

FifoQueue* fifo_of(blkmq::Queue* q) { return static_cast<FifoQueue*>(blkmq::queue_elevator(q)->elevator_data); }

// elv_priv[0] marks a request that is on the FIFO: a request being
// inserted may be merged away before it got there.
void* const kOnFifo = &g_stats;

void remove_locked(FifoQueue* fq, Request* rq) {
  if (rq->elv_priv[0] != kOnFifo) return;
  ListNode::unlink(&rq->queuelist);
  rq->elv_priv[0] = nullptr;
  fq->queued.fetch_sub(1, std::memory_order_relaxed);
}

blkmq::Status fifo_init_sched(blkmq::Queue*, blkmq::ElevatorQueue* eq) {
  auto* fq = new FifoQueue();
  fq->eq = eq;
  eq->elevator_data = fq;
  return blkmq::Status::OK();
}

// The queue is frozen and drained here: the FIFO must be empty.
void fifo_exit_sched(blkmq::ElevatorQueue* eq) {
  auto* fq = static_cast<FifoQueue*>(eq->elevator_data);
  if (!fq->fifo.empty() || fq->queued.load() != 0) g_stats.exits_not_empty++;
  delete fq;
  eq->elevator_data = nullptr;
}

void fifo_insert_requests(blkmq::HwCtx* hctx, ListNode* list, uint32_t flags) {
  FifoQueue* fq = fifo_of(hctx->queue);
  ListNode merged;  // requests absorbed on insertion, freed after the lock
  {
    std::lock_guard<std::mutex> g(fq->lock);
    while (!list->empty()) {
      Request* rq = blkmq::rq_of(list->next);
      ListNode::unlink(&rq->queuelist);
      // A request that continues a queued one joins it (back merge).
      if (blkmq::sched_try_insert_merge(hctx->queue, rq, &merged)) continue;
      if (flags & blkmq::kInsertAtHead)
        fq->fifo.push_front(&rq->queuelist);
      else
        fq->fifo.push_back(&rq->queuelist);
      rq->elv_priv[0] = kOnFifo;
      if (blkmq::rq_mergeable(rq)) blkmq::elv_rqhash_add(fq->eq, rq);
      fq->queued.fetch_add(1, std::memory_order_relaxed);
      g_stats.inserted.fetch_add(1, std::memory_order_relaxed);
    }
  }
  blkmq::free_requests(&merged);
}

Request* fifo_dispatch_request(blkmq::HwCtx* hctx) {
  FifoQueue* fq = fifo_of(hctx->queue);
  std::lock_guard<std::mutex> g(fq->lock);
  if (fq->fifo.empty()) return nullptr;
  Request* rq = blkmq::rq_of(fq->fifo.next);
  remove_locked(fq, rq);
  blkmq::elv_rqhash_del(fq->eq, rq);  // dispatched requests take no more merges
  fq->dispatched.fetch_add(1, std::memory_order_relaxed);
  g_stats.dispatched.fetch_add(1, std::memory_order_relaxed);
  return rq;
}

bool fifo_has_work(blkmq::HwCtx* hctx) { return fifo_of(hctx->queue)->queued.load(std::memory_order_relaxed) > 0; }

// A new bio that continues a queued request joins it instead of making a
// request of its own.
bool fifo_bio_merge(blkmq::Queue* q, blkmq::Bio* bio, unsigned nr_segs) {
  FifoQueue* fq = fifo_of(q);
  Request* absorbed = nullptr;
  bool merged;
  {
    std::lock_guard<std::mutex> g(fq->lock);
    merged = blkmq::sched_try_merge(q, bio, nr_segs, &absorbed);
  }
  // Without next_request/former_request hooks the core never absorbs a
  // neighbour here, but the contract says who frees one.
  if (absorbed) {
    ListNode l;
    l.push_back(&absorbed->queuelist);
    blkmq::free_requests(&l);
  }
  if (merged) g_stats.bio_merges.fetch_add(1, std::memory_order_relaxed);
  return merged;
}

// `next` was merged into `rq` (under our lock, from the helpers above):
// it leaves the FIFO and the core frees it.
void fifo_requests_merged(blkmq::Queue* q, Request*, Request* next) {
  if (next->elv_priv[0] == kOnFifo) g_stats.absorbed.fetch_add(1, std::memory_order_relaxed);
  remove_locked(fifo_of(q), next);
}

std::string fifo_show_dispatched(blkmq::ElevatorQueue* eq) {
  return std::to_string(static_cast<FifoQueue*>(eq->elevator_data)->dispatched.load());
}

blkmq::ElevatorType make_fifo_type() {
  blkmq::ElevatorType t;
  t.name = "fifo-example";
  t.queue_wide = true;
  t.ops.init_sched = fifo_init_sched;
  t.ops.exit_sched = fifo_exit_sched;
  t.ops.insert_requests = fifo_insert_requests;
  t.ops.dispatch_request = fifo_dispatch_request;
  t.ops.has_work = fifo_has_work;
  t.ops.bio_merge = fifo_bio_merge;
  t.ops.requests_merged = fifo_requests_merged;
  t.attrs.push_back({"dispatched", fifo_show_dispatched, nullptr});  // read-only
  return t;
}

// ---- the checks ----

int failures = 0;
void check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  failures += !ok;
}

constexpr uint64_t kRegion = 4 << 20;  // bytes each writer owns
constexpr unsigned kWriters = 4;

void fill(char* buf, size_t len, uint64_t offset, uint64_t gen) {
  for (size_t i = 0; i < len; i += 8) {
    uint64_t v = (offset + i) * 0x9E3779B97F4A7C15ull ^ gen;
    std::memcpy(buf + i, &v, 8);
  }
}

// Writes `len` bytes as back-to-back 4 KiB bios, all in flight at once,
// and waits for them: with few driver tags, later bios find earlier ones
// still queued in the scheduler and merge into them. True if all ended ok.
bool write_stream(blkmq::Queue& q, const char* buf, uint64_t offset, uint32_t len) {
  struct Waiter {
    std::mutex mu;
    std::condition_variable cv;
    unsigned left = 0, errors = 0;
  } w;
  const unsigned n = len / 4096;
  std::vector<blkmq::Bio> bios(n);
  std::vector<iovec> vecs(n);
  w.left = n;
  for (unsigned i = 0; i < n; i++) {
    vecs[i] = {const_cast<char*>(buf) + size_t{i} * 4096, 4096};
    bios[i].op = blkmq::ReqOp::write;
    bios[i].sector = (offset + uint64_t{i} * 4096) >> blkmq::kSectorShift;
    bios[i].size = 4096;
    bios[i].vec = &vecs[i];
    bios[i].nr_vecs = 1;
    bios[i].private_data = &w;
    // Runs in any context (here the null device's timer thread): count
    // under the lock and notify, nothing more.
    bios[i].end_io = [](blkmq::Bio* b) {
      auto* wt = static_cast<Waiter*>(b->private_data);
      std::lock_guard<std::mutex> g(wt->mu);
      wt->errors += b->status != BlkStatus::ok;
      if (--wt->left == 0) wt->cv.notify_all();
    };
    q.submit_bio(&bios[i]);
  }
  std::unique_lock<std::mutex> g(w.mu);
  w.cv.wait(g, [&] { return w.left == 0; });
  return w.errors == 0;
}

// A writer: writes 4..64 KiB at random places of its own region (every
// other time as a stream of 4 KiB bios), keeps a copy of what the region
// should hold, and reads every write back at once. Errors and mismatches
// are counted in `bad`.
void writer(blkmq::Queue& q, unsigned id, std::atomic<bool>& stop, std::vector<char>& shadow,
            std::atomic<unsigned>& bad, std::atomic<uint64_t>& ios) {
  std::mt19937_64 rng(id);
  const uint64_t base = uint64_t{id} * kRegion;
  std::vector<char> buf(64 << 10), back(64 << 10);
  for (uint64_t gen = 1; !stop.load(std::memory_order_relaxed); gen++) {
    const uint32_t len = 4096 * static_cast<uint32_t>(1 + rng() % 16);
    const uint64_t off = 4096 * (rng() % ((kRegion - len) / 4096));
    fill(buf.data(), len, base + off, gen);
    const bool ok = gen % 2 ? write_stream(q, buf.data(), base + off, len)
                            : q.write_sync(buf.data(), base + off, len) == BlkStatus::ok;
    if (!ok) bad++;
    std::memcpy(shadow.data() + off, buf.data(), len);
    if (q.read_sync(back.data(), base + off, len) != BlkStatus::ok || std::memcmp(back.data(), buf.data(), len) != 0)
      bad++;
    ios += 2;
  }
}

bool scheduler_is(blkmq::Queue& q, const std::string& name) {
  auto s = q.attr("queue/scheduler");
  return s.ok() && s.value().find("[" + name + "]") != std::string::npos;
}

}  // namespace

int main() {
  // The type must outlive every queue that may use it: a static.
  static const blkmq::ElevatorType kFifo = make_fifo_type();
  if (blkmq::Status st = blkmq::register_elevator(&kFifo); !st.ok()) {
    std::fprintf(stderr, "register_elevator: %s\n", st.message().c_str());
    return 1;
  }
  check(!blkmq::register_elevator(&kFifo).ok(), "a second registration of the name is refused");

  // null keeps the data in memory; two hw queues exercise the queue-wide
  // FIFO; irqmode=2 completes from the timer thread, as a device's
  // interrupt would; 4 driver tags per hw queue keep requests waiting in
  // the scheduler, where bios merge into them.
  auto dev = blkmq::create_device("null", {{"memory_backed", "1"}, {"size", "64"}, {"submit_queues", "2"},
                                           {"poll_queues", "0"}, {"hw_queue_depth", "4"}, {"irqmode", "2"},
                                           {"completion_nsec", "20000"}});
  if (!dev) {
    std::fprintf(stderr, "create_device(null): %s\n", dev.status().message().c_str());
    return 1;
  }
  blkmq::Queue& q = (*dev)->queue();
  auto listed = q.attr("queue/scheduler");
  check(listed.ok() && listed.value().find("fifo-example") != std::string::npos,
        "queue/scheduler lists it: " + (listed.ok() ? listed.value() : listed.status().message()));

  std::atomic<bool> stop{false};
  std::atomic<unsigned> bad{0};
  std::atomic<uint64_t> ios{0};
  std::vector<std::vector<char>> shadow(kWriters, std::vector<char>(kRegion, 0));
  std::vector<std::thread> threads;
  for (unsigned i = 0; i < kWriters; i++)
    threads.emplace_back(writer, std::ref(q), i, std::ref(stop), std::ref(shadow[i]), std::ref(bad), std::ref(ios));

  // Switch under I/O: each switch freezes the queue, drains it and tears
  // the old scheduler down, then I/O continues on the new one.
  const char* const phases[] = {"fifo-example", "mq-deadline", "fifo-example", "none",
                                "fifo-example", "kyber",       "bfq",          "fifo-example"};
  for (const char* name : phases) {
    const uint64_t before = g_stats.dispatched.load();
    blkmq::Status st = q.set_attr("queue/scheduler", name);
    check(st.ok() && scheduler_is(q, name), std::string("switched to ") + name + " under I/O" +
                                                (st.ok() ? "" : ": " + st.message()));
    const uint64_t ios_before = ios.load();
    while (ios.load() < ios_before + 400) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (std::string(name) == "fifo-example") {
      auto shown = q.attr("queue/iosched/dispatched");
      check(g_stats.dispatched.load() > before && shown.ok() && std::stoull(shown.value()) > 0,
            "requests went through fifo-example: queue/iosched/dispatched = " +
                (shown.ok() ? shown.value() : shown.status().message()));
    }
  }
  check(q.set_attr("queue/scheduler", "none").ok(), "switched away from it");
  stop = true;
  for (std::thread& t : threads) t.join();

  check(bad.load() == 0, std::to_string(ios.load()) + " I/Os, " + std::to_string(bad.load()) + " failed or read back wrong");
  // Every writer's region holds what it last wrote.
  unsigned wrong = 0;
  std::vector<char> back(kRegion);
  for (unsigned i = 0; i < kWriters; i++)
    if (q.read_sync(back.data(), uint64_t{i} * kRegion, kRegion) != BlkStatus::ok || back != shadow[i]) wrong++;
  check(wrong == 0, "the whole device reads back as written");

  const uint64_t in = g_stats.inserted, out = g_stats.dispatched, gone = g_stats.absorbed;
  check(in == out + gone, "every request it took left it: " + std::to_string(in) + " inserted, " +
                              std::to_string(out) + " dispatched, " + std::to_string(gone) + " merged away, " +
                              std::to_string(g_stats.bio_merges.load()) + " bio merges");
  check(g_stats.bio_merges > 0, "bios merged into requests it held");
  check(g_stats.exits_not_empty == 0, "its queue was empty at every teardown");
  std::printf("%s\n", failures ? "fifo scheduler example: FAILED" : "fifo scheduler example: all checks passed");
  return failures ? 1 : 0;
}

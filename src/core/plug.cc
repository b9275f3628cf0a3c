// Per-thread plugging (blk_plug): the plug state lives in the thread; the
// outermost Plug object owns it.
#include "blkmq/plug.h"

#include <algorithm>

#include "core/core.h"
#include "core/trace.h"
#include "core/time.h"

namespace blkmq {
namespace {

thread_local PlugState tls_plug_state;
thread_local PlugState* tls_plug = nullptr;

unsigned plug_max_rq_count(const PlugState* p) {
  return p->multiple_queues ? 2 * kPlugMaxRequests : kPlugMaxRequests;
}

// U (or UT from schedule) for each queue with requests in the plug, with
// how many it holds, as blk_mq_dispatch_plug_list reports each queue's.
void trace_unplug(const PlugState* p, bool from_schedule) {
  const uint32_t action = from_schedule ? blktrace::kUnplugTimer : blktrace::kUnplugIo;
  if (!p->multiple_queues) {
    trace_plug(to_impl(p->mq_list.head->q), action, p->rq_count);
    return;
  }
  // Rare and only with several queues: a pass per queue, each counted once.
  for (const Request* rq = p->mq_list.head; rq; rq = rq->rq_next) {
    bool seen = false;
    for (const Request* e = p->mq_list.head; e != rq && !seen; e = e->rq_next) seen = e->q == rq->q;
    if (seen || !tracer(to_impl(rq->q))) continue;
    unsigned depth = 0;
    for (const Request* e = rq; e; e = e->rq_next) depth += e->q == rq->q;
    trace_plug(to_impl(rq->q), action, depth);
  }
}

// blk_mq_flush_plug_list: issue the held requests.
void flush_plug_list(PlugState* p, bool from_schedule) {
  if (!p->rq_count) return;
  trace_unplug(p, from_schedule);
  p->rq_count = 0;
  RqList list = p->mq_list;
  p->mq_list.clear();
  const bool has_elevator = p->has_elevator;
  const bool multiple = p->multiple_queues;
  p->has_elevator = false;
  p->multiple_queues = false;
  issue_list_from_plug(&list, from_schedule, has_elevator, multiple);
}

}  // namespace

PlugState* current_plug_state() { return tls_plug; }

namespace {

[[gnu::noinline]] uint64_t blk_time_read_ns(const QueueImpl* q, PlugState* p) {
  if (q->clock_is_manual()) return q->clock_ns();
  if (!p) return precise_now_ns();
  p->cur_ktime = precise_now_ns();
  return p->cur_ktime;
}

}  // namespace

// Called several times per I/O: the cached case is kept small enough to
// inline, the clock read is out of line.
uint64_t blk_time_get_ns(const QueueImpl* q) {
  PlugState* p = tls_plug;
  if (p && p->cur_ktime && !q->clock_is_manual()) return p->cur_ktime;
  return blk_time_read_ns(q, p);
}

void add_rq_to_plug(PlugState* p, Request* rq) {
  Request* last = p->mq_list.tail;
  if (p->rq_count >= plug_max_rq_count(p) ||
      (last && to_impl(rq->q)->tun_.nomerges.load(std::memory_order_relaxed) < 2 &&
       last->data_len >= kPlugFlushSize)) {
    flush_plug_list(p, false);
    last = nullptr;
  }
  if (!p->rq_count) trace_plug(to_impl(rq->q), blktrace::kPlug);
  if (last && last->q != rq->q) p->multiple_queues = true;
  if (rq->rq_flags & kRqfSchedTags) p->has_elevator = true;
  p->mq_list.push_back(rq);
  p->rq_count++;
}

// __blk_flush_plug: issue, then give back unused cached requests so they
// cannot hold up a freeze.
void flush_plug(PlugState* p, bool from_schedule) {
  flush_plug_list(p, from_schedule);
  while (Request* rq = p->cached_rqs.pop_front()) free_request(rq);
  p->cur_ktime = 0;
}

void flush_current_plug(bool from_schedule) {
  if (tls_plug) flush_plug(tls_plug, from_schedule);
}

Plug::Plug(unsigned nr_ios) : owner_(tls_plug == nullptr) {
  if (!owner_) return;
  PlugState* p = &tls_plug_state;
  p->mq_list.clear();
  p->cached_rqs.clear();
  p->rq_count = 0;
  p->nr_ios = std::clamp(nr_ios, 1u, kPlugMaxRequests);
  p->multiple_queues = false;
  p->has_elevator = false;
  p->cur_ktime = 0;
  tls_plug = p;
}

void Plug::finish() {
  if (!owner_) return;
  owner_ = false;
  flush_plug(tls_plug, false);
  tls_plug = nullptr;
}

Plug::~Plug() { finish(); }

}  // namespace blkmq

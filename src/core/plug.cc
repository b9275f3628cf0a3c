// Per-thread plugging (blk_plug): the plug state lives in the thread; the
// outermost Plug object owns it.
#include "blkmq/plug.h"

#include <algorithm>

#include "core/core.h"
#include "core/time.h"

namespace blkmq {
namespace {

thread_local PlugState tls_plug_state;
thread_local PlugState* tls_plug = nullptr;

unsigned plug_max_rq_count(const PlugState* p) {
  return p->multiple_queues ? 2 * kPlugMaxRequests : kPlugMaxRequests;
}

// blk_mq_flush_plug_list: issue the held requests.
void flush_plug_list(PlugState* p, bool from_schedule) {
  if (!p->rq_count) return;
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

uint64_t blk_time_get_ns(const QueueImpl* q) {
  if (!q->clock_is_real()) return q->now_ns();
  PlugState* p = tls_plug;
  if (!p) return precise_now_ns();
  if (!p->cur_ktime) p->cur_ktime = precise_now_ns();
  return p->cur_ktime;
}

void add_rq_to_plug(PlugState* p, Request* rq) {
  Request* last = p->mq_list.tail;
  if (p->rq_count >= plug_max_rq_count(p) ||
      (last && to_impl(rq->q)->tun_.nomerges.load(std::memory_order_relaxed) < 2 &&
       last->data_len >= kPlugFlushSize)) {
    flush_plug_list(p, false);
    last = nullptr;
  }
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

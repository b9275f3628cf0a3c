// bfq's per-queue decisions (bfq_queue.cc), used by the request path in
// bfq_iosched.cc. Not a public header; all of it runs under BfqData::lock.
#pragma once

#include "sched/bfq/bfq_impl.h"

namespace blkmq::bfq {

bool is_seeky(const BfqQueue* q);
uint64_t serv_to_charge(const Request* rq, const BfqQueue* q);
uint64_t budget_left(const BfqQueue* q);
// g: the request's group (rq_group), nullptr for the root. A sync queue is
// the context's whatever its group; an async queue is per group.
QKey key_for(const IoContext* ioc, bool sync, const IoGroup* g);
BfqQueue* find_queue(BfqData* bfqd, const IoContext* ioc, bool sync, const IoGroup* g);
// Finds or makes the queue; a sync queue found in another group moves to g.
BfqQueue* get_queue(BfqData* bfqd, const IoContext* ioc, bool sync, IoGroup* g, uint64_t now);
void put_queue_if_idle(BfqData* bfqd, BfqQueue* q, uint64_t now);
void free_queue(BfqData* bfqd, BfqQueue* q);
void sweep(BfqData* bfqd, uint64_t now, bool all);
void weights_add(BfqData* bfqd, BfqQueue* q);
void weights_remove(BfqData* bfqd, BfqQueue* q);
bool asymmetric_scenario(const BfqData* bfqd, const BfqQueue* q);
bool idling_boosts_thr_without_issues(const BfqData* bfqd, const BfqQueue* q);
bool better_to_idle(const BfqData* bfqd, const BfqQueue* q);
bool budget_timed_out(const BfqQueue* q, uint64_t now);
bool may_expire_for_budget_timeout(const BfqQueue* q, uint64_t now);
void update_thinktime(BfqData* bfqd, BfqQueue* q, uint64_t now);
void update_io_intensity(BfqQueue* q, uint64_t now);
void update_seek(BfqData* bfqd, BfqQueue* q, const Request* rq);
bool add_busy(BfqData* bfqd, BfqQueue* q, const Request* rq, uint64_t now);
void del_busy(BfqData* bfqd, BfqQueue* q, bool in_service, uint64_t now);
// compensate: the idle timer expires q; its slot ends where idling began.
void expire(BfqData* bfqd, BfqQueue* q, Expire reason, uint64_t now, bool compensate = false);
BfqQueue* set_in_service(BfqData* bfqd, uint64_t now);
void arm_slice_timer(BfqData* bfqd, BfqQueue* q, uint64_t now);
void update_wr_data(BfqData* bfqd, BfqQueue* q, uint64_t charge, uint64_t now);
void end_wr(BfqData* bfqd, BfqQueue* q, uint64_t now);
uint64_t softrt_next_start(const BfqData* bfqd, const BfqQueue* q, uint64_t now);
void update_hw_tag(BfqData* bfqd);
// Peak-rate estimation (bfq_rate.cc).
void init_peak_rate(BfqData* bfqd);
void update_max_budget(BfqData* bfqd);  // after the rate or timeout_sync changed
void peak_rate_on_dispatch(BfqData* bfqd, const Request* rq, uint64_t now);
void peak_rate_on_completion(BfqData* bfqd, uint64_t now);
uint64_t wr_duration(const BfqData* bfqd);
void reset_inject_limit(BfqData* bfqd, BfqQueue* q, uint64_t now);
void update_inject_limit(BfqData* bfqd, BfqQueue* q, uint64_t tot_ns, bool alone, uint64_t now);

}  // namespace blkmq::bfq

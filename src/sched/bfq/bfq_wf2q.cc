// B-WF2Q+ (block/bfq-wf2q.c), flat: one service tree per class, each with a
// virtual time V, a weight sum, an active tree ordered by finish time and an
// idle tree of entities that left with F > V.
//
// Selection takes, in class order, the eligible entity (S <= V) with the
// smallest F; when none is eligible V jumps to the smallest S. The kernel
// finds it by descending an rbtree augmented with the minimum start of each
// subtree; we walk the finish-ordered set until the first eligible entity,
// which picks the same entity and is cheap for the handful of busy queues a
// device has.
#include "sched/bfq/bfq_impl.h"

namespace blkmq::bfq {
namespace {

uint64_t delta(uint64_t service, uint64_t weight) {
  return weight ? (service << kServiceShift) / weight : 0;
}

void calc_finish(BfqQueue* bfqq, uint64_t service) { bfqq->finish = bfqq->start + delta(service, bfqq->weight); }

// Applies a pending weight/class change (__bfq_entity_update_weight_prio),
// moving the entity's share of wsum to its new tree. The entity is on no
// active tree.
void update_weight_prio(BfqData* bfqd, BfqQueue* bfqq) {
  const unsigned new_weight = bfqq->new_orig_weight * bfqq->wr_coeff;
  if (!bfqq->prio_changed && new_weight == bfqq->weight && bfqq->new_cls == bfqq->cls) return;
  if (bfqq->counted) bfqd->st[bfqq->tree_cls].wsum -= bfqq->weight;
  bfqq->orig_weight = bfqq->new_orig_weight;
  bfqq->weight = new_weight;
  bfqq->cls = bfqq->new_cls;
  bfqq->prio_changed = false;
  if (bfqq->counted) {
    bfqq->tree_cls = bfqq->cls;
    bfqd->st[bfqq->cls].wsum += bfqq->weight;
  }
}

// Idle-tree entities whose finish V has passed carry no more history.
void forget_idle(BfqData* bfqd, ServiceTree* st) {
  while (!st->idle.empty()) {
    BfqQueue* first = *st->idle.begin();
    if (first->finish > st->vtime) break;
    forget_entity(bfqd, first);
  }
}

void active_insert(BfqData* bfqd, BfqQueue* bfqq) {
  bfqq->tree_cls = bfqq->cls;
  bfqd->st[bfqq->cls].active.insert(bfqq);
  bfqq->tree = BfqQueue::kActive;
}

}  // namespace

unsigned ioprio_weight(unsigned level) {
  return (kIoprioNrLevels - (level & (kIoprioNrLevels - 1))) * kWeightConversionCoeff;
}

void forget_entity(BfqData* bfqd, BfqQueue* bfqq) {
  ServiceTree* st = &bfqd->st[bfqq->tree_cls];
  if (bfqq->tree == BfqQueue::kIdleTree) st->idle.erase(bfqq);
  bfqq->tree = BfqQueue::kNone;
  if (bfqq->counted) st->wsum -= bfqq->weight;
  bfqq->counted = false;
}

void activate_entity(BfqData* bfqd, BfqQueue* bfqq, bool back_shift) {
  // A queue that left empty while it was being served and comes back in
  // time (bfq_bfqq_update_budg_for_activation) starts from its old finish
  // instead of V when V has passed it: its pause was its process thinking,
  // not a gift of service to give back (__bfq_activate_entity).
  const uint64_t v = bfqd->st[bfqq->new_cls].vtime;
  const bool shifted = back_shift && v > bfqq->finish;
  const uint64_t min_start = shifted ? bfqq->finish : v;
  if (bfqq->tree == BfqQueue::kIdleTree) {
    ServiceTree* old = &bfqd->st[bfqq->tree_cls];
    old->idle.erase(bfqq);
    bfqq->tree = BfqQueue::kNone;
    update_weight_prio(bfqd, bfqq);
    // Coming back before V passed its old finish: it may not restart
    // earlier than that, so it cannot gain by leaving and returning.
    bfqq->start = min_start > bfqq->finish ? min_start : bfqq->finish;
  } else {
    update_weight_prio(bfqd, bfqq);
    bfqq->start = min_start;
    bfqq->tree_cls = bfqq->cls;
    bfqd->st[bfqq->cls].wsum += bfqq->weight;
    bfqq->counted = true;
  }
  bfqq->service = 0;
  calc_finish(bfqq, bfqq->budget);
  // bfq_update_fin_time_enqueue: a back-shifted finish still behind V is
  // pushed up to V (less for a raised queue), so that queues which pause
  // often cannot pile up ever lower timestamps and then hold the device.
  const uint64_t vnow = bfqd->st[bfqq->cls].vtime;
  if (shifted && vnow > bfqq->finish) {
    const uint64_t d = (vnow - bfqq->finish) / bfqq->wr_coeff;
    bfqq->start += d;
    bfqq->finish += d;
  }
  active_insert(bfqd, bfqq);
}

void requeue_entity(BfqData* bfqd, BfqQueue* bfqq) {
  // Charged what it actually received; the next slot starts where it ended.
  calc_finish(bfqq, bfqq->service);
  bfqq->start = bfqq->finish;
  update_weight_prio(bfqd, bfqq);
  bfqq->service = 0;
  calc_finish(bfqq, bfqq->budget);
  active_insert(bfqd, bfqq);
}

void deactivate_entity(BfqData* bfqd, BfqQueue* bfqq, bool in_service) {
  ServiceTree* st = &bfqd->st[bfqq->tree_cls];
  if (in_service) calc_finish(bfqq, bfqq->service);
  else if (bfqq->tree == BfqQueue::kActive) st->active.erase(bfqq);
  bfqq->tree = BfqQueue::kNone;
  if (bfqq->counted && bfqq->finish > st->vtime) {
    st->idle.insert(bfqq);
    bfqq->tree = BfqQueue::kIdleTree;
  } else {
    forget_entity(bfqd, bfqq);
  }
}

void entity_served(BfqData* bfqd, BfqQueue* bfqq, uint64_t sectors) {
  bfqq->service += sectors;
  ServiceTree* st = &bfqd->st[bfqq->tree_cls];
  if (st->wsum) st->vtime += delta(sectors, st->wsum);
  forget_idle(bfqd, st);
}

BfqQueue* get_next_queue(BfqData* bfqd, uint64_t now) {
  unsigned order[kNrClasses] = {kRt, kBe, kIdle};
  // The idle class is tried first when it has waited BFQ_CL_IDLE_TIMEOUT.
  if (now > bfqd->class_idle_last_service + kClassIdleTimeoutNs && !bfqd->st[kIdle].active.empty()) {
    order[0] = kIdle;
    order[1] = kRt;
    order[2] = kBe;
  }
  for (unsigned c : order) {
    ServiceTree* st = &bfqd->st[c];
    if (st->active.empty()) continue;
    uint64_t min_start = UINT64_MAX;
    for (BfqQueue* e : st->active) min_start = e->start < min_start ? e->start : min_start;
    if (min_start > st->vtime) {  // bfq_calc_vtime_jump
      st->vtime = min_start;
      forget_idle(bfqd, st);
    }
    for (auto it = st->active.begin(); it != st->active.end(); ++it) {
      BfqQueue* e = *it;
      if (e->start > st->vtime) continue;
      st->active.erase(it);
      e->tree = BfqQueue::kNone;  // in service: off the tree, still in wsum
      if (c == kIdle) bfqd->class_idle_last_service = now;
      return e;
    }
  }
  return nullptr;
}

}  // namespace blkmq::bfq

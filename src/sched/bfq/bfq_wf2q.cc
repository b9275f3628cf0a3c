// B-WF2Q+ (block/bfq-wf2q.c), hierarchical: every group has one service
// tree per class, each with a virtual time V, a weight sum, an active tree
// ordered by finish time and an idle tree of entities that left with F > V.
// A group's entity sits in its parent's trees; the root group's trees are
// the top. While every request comes from the root group (the flat case)
// the loops below run once and nothing else changes.
//
// Selection takes, level by level from the root and in class order, the
// eligible entity (S <= V) with the smallest F; when none is eligible V
// jumps to the smallest S. As in the kernel, the active tree caches the
// minimum start of each subtree (bfq_tree.h), so both the smallest S and
// the first eligible entity in finish order take one descent at most.
//
// The entities on the path from the root to the in-service queue are all
// "in service": off their active trees, still counted in their wsum. When
// the queue expires, each of them is requeued (charged what it received)
// or, if its group has nothing left, deactivated. The kernel keeps a
// cached next_in_service per level and leaves an in-service group on its
// tree while it has other active children; taking the whole path off and
// putting it back at expiry charges the same service at the same moments.
#include "sched/bfq/bfq_impl.h"

namespace blkmq::bfq {
namespace {

uint64_t delta(uint64_t service, uint64_t weight) {
  return weight ? (service << kServiceShift) / weight : 0;
}

void calc_finish(BfqEntity* e, uint64_t service) { e->finish = e->start + delta(service, e->weight); }

// A group entity takes its weight from io.bfq.weight, read when it is
// (re)queued, as the kernel applies a new weight at the next activation:
// this device's weight if one was written, else the group's default.
void refresh_group_weight(BfqEntity* e) {
  auto* g = static_cast<BfqGroup*>(e);
  const unsigned w = g->dev_weight ? g->dev_weight : io_group_bfq_weight(g->iog);
  if (w != g->new_orig_weight) {
    g->new_orig_weight = w;
    g->prio_changed = true;
  }
}

// Applies a pending weight/class change (__bfq_entity_update_weight_prio),
// moving the entity's share of wsum to its new tree. The entity is on no
// active tree.
void update_weight_prio(BfqEntity* e) {
  if (e->my_sd) [[unlikely]] refresh_group_weight(e);
  const unsigned new_weight = e->new_orig_weight * e->wr_coeff;
  if (!e->prio_changed && new_weight == e->weight && e->new_cls == e->cls) return;
  if (e->counted) e->sd->st[e->tree_cls].wsum -= e->weight;
  e->orig_weight = e->new_orig_weight;
  e->weight = new_weight;
  e->cls = e->new_cls;
  e->prio_changed = false;
  if (e->counted) {
    e->tree_cls = e->cls;
    e->sd->st[e->cls].wsum += e->weight;
  }
}

// Idle-tree entities whose finish V has passed carry no more history.
void forget_idle(ServiceTree* st) {
  while (BfqEntity* first = st->idle.first()) {
    if (first->finish > st->vtime) break;
    forget_entity(first);
  }
}

void active_insert(BfqEntity* e) {
  e->tree_cls = e->cls;
  e->sd->st[e->cls].active.insert(e);
  e->tree = BfqEntity::kActive;
}

// One entity becomes active in its group's trees (__bfq_activate_entity).
void activate_one(BfqEntity* e, bool back_shift) {
  // A queue that left empty while it was being served and comes back in
  // time (bfq_bfqq_update_budg_for_activation) starts from its old finish
  // instead of V when V has passed it: its pause was its process thinking,
  // not a gift of service to give back (__bfq_activate_entity).
  ServiceTree* sts = e->sd->st;
  const uint64_t v = sts[e->new_cls].vtime;
  const bool shifted = back_shift && v > e->finish;
  const uint64_t min_start = shifted ? e->finish : v;
  if (e->tree == BfqEntity::kIdleTree) {
    sts[e->tree_cls].idle.erase(e);
    e->tree = BfqEntity::kNone;
    update_weight_prio(e);
    // Coming back before V passed its old finish: it may not restart
    // earlier than that, so it cannot gain by leaving and returning.
    e->start = min_start > e->finish ? min_start : e->finish;
  } else {
    update_weight_prio(e);
    e->start = min_start;
    e->tree_cls = e->cls;
    sts[e->cls].wsum += e->weight;
    e->counted = true;
  }
  e->service = 0;
  calc_finish(e, e->budget);
  // bfq_update_fin_time_enqueue: a back-shifted finish still behind V is
  // pushed up to V (less for a raised queue), so that queues which pause
  // often cannot pile up ever lower timestamps and then hold the device.
  const uint64_t vnow = sts[e->cls].vtime;
  if (shifted && vnow > e->finish) {
    const uint64_t d = (vnow - e->finish) / e->wr_coeff;
    e->start += d;
    e->finish += d;
  }
  active_insert(e);
}

// The in-service entity goes back on its active tree, charged what it
// actually received; its next slot starts where this one ended.
void requeue_one(BfqEntity* e) {
  calc_finish(e, e->service);
  e->start = e->finish;
  update_weight_prio(e);
  e->service = 0;
  calc_finish(e, e->budget);
  active_insert(e);
}

// An entity leaves its active tree (or service) for the idle tree, or is
// forgotten when V has already passed its finish.
void deactivate_one(BfqEntity* e, bool in_service) {
  ServiceTree* st = &e->sd->st[e->tree_cls];
  if (in_service) calc_finish(e, e->service);
  else if (e->tree == BfqEntity::kActive) st->active.erase(e);
  e->tree = BfqEntity::kNone;
  if (e->counted && e->finish > st->vtime) {
    st->idle.insert(e);
    e->tree = BfqEntity::kIdleTree;
  } else {
    forget_entity(e);
  }
}

// The budget a group's entity is queued with: its next child's, as the
// kernel's bfq_update_parent_budget sets it, so that the group's finish
// time reflects the slot it will hand out next.
uint64_t next_child_budget(const SchedData* sd) {
  for (const ServiceTree& st : sd->st) {
    if (st.active.empty()) continue;
    if (const BfqEntity* e = st.active.first_eligible(st.vtime)) return e->budget;
    return st.active.first()->budget;
  }
  return 0;
}

// `child` (a queue or a group entity) left the in-service path and was
// requeued or deactivated; each ancestor on the path is then requeued with
// its charge if its group still has work, or deactivated if it has none
// (an emptied group leaves its parent's trees).
void leave_service_path(BfqEntity* child) {
  child->sd->in_service = nullptr;
  for (BfqEntity* e = child->parent; e; e = e->parent) {
    if (e->my_sd->busy()) {
      e->budget = next_child_budget(e->my_sd);
      requeue_one(e);
    } else {
      deactivate_one(e, true);
    }
    e->sd->in_service = nullptr;
  }
}

// The next entity of one group (bfq_lookup_next_entity), taken off its
// active tree, or nullptr.
BfqEntity* lookup_next(SchedData* sd, uint64_t now) {
  unsigned order[kNrClasses] = {kRt, kBe, kIdle};
  // The idle class is tried first when it has waited BFQ_CL_IDLE_TIMEOUT.
  if (now > sd->class_idle_last_service + kClassIdleTimeoutNs && !sd->st[kIdle].active.empty()) {
    order[0] = kIdle;
    order[1] = kRt;
    order[2] = kBe;
  }
  for (unsigned c : order) {
    ServiceTree* st = &sd->st[c];
    if (st->active.empty()) continue;
    const uint64_t min_start = st->active.min_start();
    if (min_start > st->vtime) {  // bfq_calc_vtime_jump
      st->vtime = min_start;
      forget_idle(st);
    }
    // Never null: after the jump the entity with the smallest start is
    // eligible.
    BfqEntity* e = st->active.first_eligible(st->vtime);
    st->active.erase(e);
    e->tree = BfqEntity::kNone;  // in service: off the tree, still in wsum
    if (c == kIdle) sd->class_idle_last_service = now;
    return e;
  }
  return nullptr;
}

}  // namespace

unsigned ioprio_weight(unsigned level) {
  return (kIoprioNrLevels - (level & (kIoprioNrLevels - 1))) * kWeightConversionCoeff;
}

void forget_entity(BfqEntity* e) {
  ServiceTree* st = &e->sd->st[e->tree_cls];
  if (e->tree == BfqEntity::kIdleTree) st->idle.erase(e);
  e->tree = BfqEntity::kNone;
  if (e->counted) st->wsum -= e->weight;
  e->counted = false;
}

void activate_entity(BfqData*, BfqQueue* bfqq, bool back_shift) {
  activate_one(bfqq, back_shift);
  // bfq_activate_requeue_entity: the ancestors that were not queued
  // become active, each with the budget of the child that woke it. One
  // already queued (or on the in-service path) keeps its place.
  BfqEntity* child = bfqq;
  for (BfqEntity* e = bfqq->parent; e; child = e, e = e->parent) {
    if (e->tree == BfqEntity::kActive || e->sd->in_service == e) break;
    e->budget = child->budget;
    activate_one(e, false);
  }
}

void requeue_entity(BfqData*, BfqQueue* bfqq) {
  requeue_one(bfqq);
  leave_service_path(bfqq);
}

void deactivate_entity(BfqData*, BfqQueue* bfqq, bool in_service) {
  deactivate_one(bfqq, in_service);
  if (in_service) {
    leave_service_path(bfqq);
    return;
  }
  // Not on the in-service path: the groups it emptied leave their parents.
  for (BfqEntity* e = bfqq->parent; e && !e->my_sd->busy(); e = e->parent) deactivate_one(e, false);
}

namespace {
void served_one(BfqEntity* e, uint64_t sectors) {
  e->service += sectors;
  ServiceTree* st = &e->sd->st[e->tree_cls];
  if (st->wsum) st->vtime += delta(sectors, st->wsum);
  forget_idle(st);
}
}  // namespace

void entity_served(BfqData*, BfqQueue* bfqq, uint64_t sectors) {
  // bfq_bfqq_served: the service counts at every level, for the queue's
  // slot and its ancestors' virtual times alike.
  served_one(bfqq, sectors);
  if (bfqq->parent) [[unlikely]]
    for (BfqEntity* e = bfqq->parent; e; e = e->parent) served_one(e, sectors);
}

BfqQueue* get_next_queue(BfqData* bfqd, uint64_t now) {
  for (;;) {
    SchedData* sd = &bfqd->root.own;
    BfqEntity* e;
    while ((e = lookup_next(sd, now))) {
      sd->in_service = e;
      if (!e->my_sd) return static_cast<BfqQueue*>(e);
      sd = e->my_sd;
    }
    if (sd == &bfqd->root.own) return nullptr;
    // A queued group with nothing below (never expected: a group leaves
    // its parent when its last child goes): take it off and look again.
    BfqEntity* g = sd->owner;
    deactivate_one(g, true);
    leave_service_path(g);
  }
}

}  // namespace blkmq::bfq

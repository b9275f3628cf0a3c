// bfq's group scheduling (block/bfq-cgroup.c): per (I/O group, bfq
// instance) state made on a group's first request here, queues that follow
// their context into another group, the groups' lifetime, and the
// io.bfq.weight file. The B-WF2Q+ levels themselves are in bfq_wf2q.cc.
//
// Lifetime, as the kernel's "a queue keeps its group alive": a BfqGroup is
// referenced by each of its queues, each child group and, until its I/O
// group is removed, the link from BfqData::groups. It holds a reference on
// its IoGroup, so the IoGroup* key never names a reused address while the
// state lives. Requests hold their queue (BfqQueue::refs), so a group
// removed with requests in flight keeps its state until they complete and
// its queues are swept. Everything here runs under BfqData::lock.
#include <cerrno>
#include <string>

#include "base/cgroup_file.h"
#include "base/parse.h"
#include "sched/bfq/bfq_impl.h"
#include "sched/bfq/bfq_queue.h"

namespace blkmq::bfq {
namespace {

void group_get(BfqData* bfqd, BfqGroup* g) {
  if (g != &bfqd->root) g->refs++;
}

void free_group(BfqData* bfqd, BfqGroup* g) {
  if (g->tree == BfqEntity::kActive) {  // never expected: a group with no refs has no queued child
    g->sd->st[g->tree_cls].active.erase(g);
    g->tree = BfqEntity::kNone;
  }
  forget_entity(g);
  bfqd->all_groups.erase(g);
  bfqd->stats.groups_alive--;
  io_group_put(g->iog);
  delete g;
}

void group_put(BfqData* bfqd, BfqGroup* g) {
  while (g != &bfqd->root && --g->refs == 0) {
    BfqGroup* parent = g->parent_group;
    free_group(bfqd, g);
    g = parent;
  }
}

BfqGroup* new_group(BfqData* bfqd, IoGroup* iog, BfqGroup* parent) {
  auto* g = new BfqGroup();
  g->uid = bfqd->next_uid++;
  g->iog = iog;
  io_group_get(iog);
  g->parent_group = parent;
  group_get(bfqd, parent);
  g->parent = parent == &bfqd->root ? nullptr : parent;
  g->sd = &parent->own;
  // A group's entity is best effort in its parent, as the kernel's.
  g->cls = g->new_cls = g->tree_cls = kBe;
  g->orig_weight = g->new_orig_weight = g->weight = io_group_bfq_weight(iog);
  g->own.class_idle_last_service = now_ns(bfqd);
  g->refs = 1;  // the link
  g->linked = true;
  bfqd->groups.emplace(iog, g);
  bfqd->all_groups.insert(g);
  bfqd->stats.groups_created++;
  bfqd->stats.groups_alive++;
  return g;
}

Result<std::string> show_weight(ElevatorQueue* eq, IoGroup* g) {
  BfqData* bfqd = bfqd_of(eq);
  std::string s = "default " + std::to_string(io_group_bfq_weight(g));
  bfqd->lock.lock();
  auto it = bfqd->groups.find(g);
  const unsigned dev = it == bfqd->groups.end() ? 0 : it->second->dev_weight;
  bfqd->lock.unlock();
  // The kernel lists a device only when a weight was set for it.
  if (dev)
    s += "\n" + std::to_string(Queue::kDevMajor) + ":" + std::to_string(bfqd->q->dev_minor()) + " " +
         std::to_string(dev);
  return s;
}

// This device's weight: 0 clears it (the kernel's "MAJ:MIN default").
Status set_dev_weight(BfqData* bfqd, IoGroup* g, unsigned w) {
  bfqd->lock.lock();
  if (!io_group_online(g)) {
    bfqd->lock.unlock();
    return Status::error(ENOENT, "I/O group '" + io_group_path(g) + "' was removed");
  }
  group_for(bfqd, g)->dev_weight = w;  // applied at the entity's next (re)queueing
  bfqd->lock.unlock();
  return Status::OK();
}

// cgroup v2's io.bfq.weight (bfq_io_set_weight): "N" or "default N" set
// the group's weight on every device; "MAJ:MIN N" this device's, and
// "MAJ:MIN default" clears it. The attribute belongs to one device, so the
// MAJ:MIN given is not checked against it.
Status store_weight(ElevatorQueue* eq, IoGroup* g, std::string_view v) {
  const std::string name = "cgroup" + io_group_path(g) + "/io.bfq.weight";
  auto w = base::parse_weight_write(name, v, kIoGroupWeightMin, kIoGroupWeightMax);
  if (!w) return w.status();
  if (w->kind == base::WeightWrite::kGroup) return io_group_set_bfq_weight(g, w->weight);
  return set_dev_weight(bfqd_of(eq), g, w->weight);  // 0 (kDeviceClear) clears it
}

}  // namespace

BfqGroup* group_for(BfqData* bfqd, IoGroup* iog) {
  if (!iog || !io_group_parent(iog)) return &bfqd->root;
  auto it = bfqd->groups.find(iog);
  if (it != bfqd->groups.end()) return it->second;
  return new_group(bfqd, iog, group_for(bfqd, io_group_parent(iog)));
}

void queue_set_group(BfqData* bfqd, BfqQueue* q, BfqGroup* g) {
  q->bfqg = g;
  q->iog = g->iog;
  q->parent = g == &bfqd->root ? nullptr : g;
  q->sd = &g->own;
  group_get(bfqd, g);
}

void queue_put_group(BfqData* bfqd, BfqQueue* q) {
  group_put(bfqd, q->bfqg);
  q->bfqg = nullptr;
}

void move_queue(BfqData* bfqd, BfqQueue* q, BfqGroup* g, uint64_t now) {
  if (q == bfqd->in_service) expire(bfqd, q, Expire::preempted, now);
  const bool busy = q->busy;
  if (busy) deactivate_entity(bfqd, q, false);
  forget_entity(q);  // no history carries over to another group's clock
  const bool pending = q->in_groups_pending;
  groups_pending_remove(bfqd, q);
  BfqGroup* old = q->bfqg;
  queue_set_group(bfqd, q, g);
  group_put(bfqd, old);
  if (pending) groups_pending_add(bfqd, q);
  if (busy) activate_entity(bfqd, q, false);
  bfqd->stats.queues_moved++;
}

void sweep_groups(BfqData* bfqd) {
  for (auto it = bfqd->groups.begin(); it != bfqd->groups.end();) {
    BfqGroup* g = it->second;
    if (io_group_online(g->iog)) {
      ++it;
      continue;
    }
    it = bfqd->groups.erase(it);
    g->linked = false;
    group_put(bfqd, g);  // the parent, linked or held by g, outlives this
  }
}

void free_all_groups(BfqData* bfqd) {
  for (BfqGroup* g : bfqd->all_groups) {
    io_group_put(g->iog);
    delete g;
  }
  bfqd->all_groups.clear();
  bfqd->groups.clear();
}

std::vector<ElvGroupAttr> bfq_group_attrs() {
  ElvGroupAttr w;
  w.name = "io.bfq.weight";
  w.show = show_weight;
  w.store = store_weight;
  return {w};
}

}  // namespace blkmq::bfq

namespace blkmq {

BfqGroupInfo bfq_group_info(Queue* q, const IoGroup* g) {
  BfqGroupInfo i;
  ElevatorQueue* eq = queue_elevator(q);
  if (!eq || eq->type->name != "bfq") return i;
  bfq::BfqData* bfqd = bfq::bfqd_of(eq);
  bfqd->lock.lock();
  auto it = bfqd->groups.find(g);
  if (it != bfqd->groups.end()) {
    const bfq::BfqGroup* bg = it->second;
    i.found = true;
    i.weight = bg->weight;
    i.dev_weight = bg->dev_weight;
    i.refs = bg->refs;
    i.active = bg->tree == bfq::BfqEntity::kActive || (bg->sd && bg->sd->in_service == bg);
  }
  bfqd->lock.unlock();
  return i;
}

}  // namespace blkmq

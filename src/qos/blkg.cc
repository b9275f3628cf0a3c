// Per (group, queue) data (blkcg_gq): lookup and creation on a group's
// first bio to a queue, reference counting against bios in flight, and
// io.stat.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <mutex>

#include "core/core.h"
#include "qos/blkcg.h"
#include "qos/iolatency.h"

namespace blkmq {
namespace {

// Under g's blkg_lock.
Blkg* find_blkg(const IoGroup* g, const QueueImpl* q) {
  for (Blkg* b : g->blkgs)
    if (b->q == q) return b;
  return nullptr;
}

// The blkg of g on q, made with its ancestors' if missing (blkg_create:
// a blkg's parent exists first and is held). Under the tree mutex; g is
// online and not the root.
Blkg* blkg_create_locked(QueueImpl* q, IoGroup* g) {
  g->blkg_lock.lock();
  Blkg* b = find_blkg(g, q);
  g->blkg_lock.unlock();
  if (b) return b;
  Blkg* parent = g->parent->parent ? blkg_create_locked(q, g->parent) : nullptr;
  b = new Blkg;
  b->q = q;
  b->group = g;
  io_group_get(g);
  if ((b->parent = parent)) parent->ref.fetch_add(1, std::memory_order_relaxed);
  q->blkgs_.push_back(b);
  g->blkg_lock.lock();
  g->blkgs.push_back(b);
  g->blkg_lock.unlock();
  return b;
}

// A reference on g's blkg for q, or nullptr if g was removed meanwhile (the
// bio is then charged to nobody, as the kernel's falls back to the root).
Blkg* blkg_lookup_get(QueueImpl* q, IoGroup* g) {
  g->blkg_lock.lock();
  Blkg* b = find_blkg(g, q);
  if (b) b->ref.fetch_add(1, std::memory_order_relaxed);
  g->blkg_lock.unlock();
  if (b) return b;
  std::lock_guard<std::mutex> l(blkcg_tree_lock());
  if (!g->online) return nullptr;
  b = blkg_create_locked(q, g);
  b->ref.fetch_add(1, std::memory_order_relaxed);
  return b;
}

bool in_subtree(const IoGroup* g, const IoGroup* top) {
  for (; g; g = g->parent)
    if (g == top) return true;
  return false;
}

std::string iostat_line(const QueueImpl* q, const uint64_t bytes[kIostatNr], const uint64_t ios[kIostatNr]) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "%u:%u rbytes=%" PRIu64 " wbytes=%" PRIu64 " rios=%" PRIu64 " wios=%" PRIu64 " dbytes=%" PRIu64
                " dios=%" PRIu64,
                Queue::kDevMajor, q->minor_, bytes[kIostatRead], bytes[kIostatWrite], ios[kIostatRead],
                ios[kIostatWrite], bytes[kIostatDiscard], ios[kIostatDiscard]);
  return buf;
}

// The root's line comes from the device's own statistics, as the kernel's
// blkcg_fill_root_iostats: the root's bios are not counted one by one.
std::string root_iostat(const QueueImpl* q) {
  const DiskStat d = static_cast<const Queue*>(q)->disk_stat();
  const uint64_t bytes[kIostatNr] = {d.read_sectors << kSectorShift, d.write_sectors << kSectorShift,
                                     d.discard_sectors << kSectorShift};
  const uint64_t ios[kIostatNr] = {d.read_ios, d.write_ios, d.discard_ios};
  return iostat_line(q, bytes, ios);
}

}  // namespace

void blkcg_bio_start_ioc(QueueImpl* q, Bio* bio) {
  const IoContext* ioc = bio->ioc ? bio->ioc : current_io_context();
  if (IoGroup* g = ioc->group) blkcg_bio_start(q, bio, g);
}

void blkcg_bio_start(QueueImpl* q, Bio* bio, IoGroup* g) {
  Blkg* b = blkg_lookup_get(q, g);
  if (!b) return;
  bio->blkg = b;
  const unsigned t = iostat_type(bio->op);
  b->bytes[t].fetch_add(bio->size, std::memory_order_relaxed);
  b->ios[t].fetch_add(1, std::memory_order_relaxed);
}

void blkg_put(Blkg* b) {
  while (b && b->ref.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    Blkg* parent = b->parent;
    io_group_put(b->group);
    iolatency_blkg_free(b);
    delete b;
    b = parent;
  }
}

void blkg_unlink_locked(Blkg* b) {
  iolatency_blkg_offline(b);
  b->online = false;
  IoGroup* g = b->group;
  g->blkg_lock.lock();
  g->blkgs.erase(std::remove(g->blkgs.begin(), g->blkgs.end(), b), g->blkgs.end());
  g->blkg_lock.unlock();
  auto& ql = b->q->blkgs_;
  ql.erase(std::remove(ql.begin(), ql.end(), b), ql.end());
  if (Blkg* p = b->parent) {
    for (unsigned t = 0; t < kIostatNr; t++) {
      p->bytes[t].fetch_add(b->bytes[t].load(std::memory_order_relaxed), std::memory_order_relaxed);
      p->ios[t].fetch_add(b->ios[t].load(std::memory_order_relaxed), std::memory_order_relaxed);
    }
  }
}

Blkg* blkg_conf_get_locked(QueueImpl* q, IoGroup* g) { return blkg_create_locked(q, g); }

void blkcg_exit_queue(QueueImpl* q) {
  std::unique_lock<std::mutex> l(blkcg_tree_lock());
  const std::vector<Blkg*> dying = q->blkgs_;
  for (Blkg* b : dying) blkg_unlink_locked(b);
  l.unlock();
  for (Blkg* b : dying) blkg_put(b);
}

Result<std::string> blkcg_attr_show(const QueueImpl* q, std::string_view rest) {
  constexpr std::string_view kFile = "io.stat";
  if (rest.size() < kFile.size() || rest.substr(rest.size() - kFile.size()) != kFile ||
      (rest.size() > kFile.size() && rest[rest.size() - kFile.size() - 1] != '/'))
    return Status::invalid("cgroup/" + std::string(rest) + ": expected cgroup/<group path>/io.stat");
  const std::string_view path = rest.substr(0, rest.size() - kFile.size());
  if (path.empty() || path == "/") return root_iostat(q);
  uint64_t bytes[kIostatNr] = {}, ios[kIostatNr] = {};
  // Held from the lookup on, so the group cannot be removed meanwhile.
  std::lock_guard<std::mutex> l(blkcg_tree_lock());
  IoGroup* g = io_group_find_locked(path);
  if (!g) return Status::error(ENOENT, "cgroup/" + std::string(rest) + ": no such I/O group");
  // Hierarchical, as cgroup v2's io.stat: the group and every descendant.
  for (const Blkg* b : q->blkgs_) {
    if (!in_subtree(b->group, g)) continue;
    for (unsigned t = 0; t < kIostatNr; t++) {
      bytes[t] += b->bytes[t].load(std::memory_order_relaxed);
      ios[t] += b->ios[t].load(std::memory_order_relaxed);
    }
  }
  return iostat_line(q, bytes, ios);
}

std::vector<std::string> blkcg_attr_names() {
  std::vector<std::string> out;
  for (const std::string& p : io_group_list()) out.push_back("cgroup" + (p == "/" ? std::string() : p) + "/io.stat");
  return out;
}

}  // namespace blkmq

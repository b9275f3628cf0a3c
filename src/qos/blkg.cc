// Per (group, queue) data (blkcg_gq): lookup and creation on a group's
// first bio to a queue, reference counting against bios in flight, and
// io.stat.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <mutex>

#include "core/core.h"
#include "qos/blkcg.h"
#include "qos/iocost.h"
#include "qos/iolatency.h"
#include "qos/throtl.h"

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
  b->tg = throtl_tg_alloc(q, parent);
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

bool blkcg_bio_start_ioc(QueueImpl* q, Bio* bio) {
  const IoContext* ioc = bio->ioc ? bio->ioc : current_io_context();
  IoGroup* g = ioc->group;
  if (!g || !blkcg_bio_associate(q, bio, g)) return false;
  // io.max first, io.stat once it passes: the kernel's blk_throtl_bio runs
  // before blk_cgroup_bio_start.
  if (throtl_active(q->throtl_) && throtl_bio_slow(q, bio)) return true;
  blkcg_bio_account(bio);
  return false;
}

bool blkcg_bio_associate(QueueImpl* q, Bio* bio, IoGroup* g) {
  Blkg* b = blkg_lookup_get(q, g);
  bio->blkg = b;
  return b != nullptr;
}

void blkcg_bio_account(const Bio* bio) {
  Blkg* b = bio->blkg;
  const unsigned t = iostat_type(bio->op);
  b->bytes[t].fetch_add(bio->size, std::memory_order_relaxed);
  b->ios[t].fetch_add(1, std::memory_order_relaxed);
}

void blkg_put(Blkg* b) {
  while (b && b->ref.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    Blkg* parent = b->parent;
    // The policies' state first: io.cost's period timer reads the group
    // of every blkg it still lists, until iocost_blkg_free unlists it.
    iolatency_blkg_free(b);
    iocost_blkg_free(b);
    throtl_tg_free(b->tg);
    io_group_put(b->group);
    delete b;
    b = parent;
  }
}

void blkg_unlink_locked(Blkg* b) {
  iolatency_blkg_offline(b);
  throtl_blkg_offline(b);
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

namespace {

constexpr std::string_view kIoStat = "io.stat";
constexpr std::string_view kIoMax = "io.max";

// Splits "<group path>/<file>" ("io.stat" alone: the root) into the path
// and the file; false if rest names neither file.
bool split_attr(std::string_view rest, std::string_view* path, std::string_view* file) {
  for (std::string_view f : {kIoStat, kIoMax}) {
    if (rest.size() < f.size() || rest.substr(rest.size() - f.size()) != f) continue;
    if (rest.size() > f.size() && rest[rest.size() - f.size() - 1] != '/') continue;
    *path = rest.substr(0, rest.size() - f.size());
    *file = f;
    return true;
  }
  return false;
}

bool is_root_path(std::string_view p) { return p.empty() || p == "/"; }

Status no_group(std::string_view rest) {
  return Status::error(ENOENT, "cgroup/" + std::string(rest) + ": no such I/O group");
}

// The blkg of g on q, if g was ever used or configured on q. Under the
// tree mutex.
Blkg* blkg_of(const QueueImpl* q, IoGroup* g) {
  std::lock_guard<base::SpinLock> l(g->blkg_lock);
  return find_blkg(g, q);
}

// io.stat's line, with the keys of the policies on q after the counts (as
// the kernel's pd_stat_fn output follows them).
Result<std::string> iostat_show(const QueueImpl* q, std::string_view rest, std::string_view path) {
  // The sysfs lock keeps q's policy chain in place while their keys are read.
  std::lock_guard<std::mutex> sl(const_cast<QueueImpl*>(q)->sysfs_lock_);
  if (is_root_path(path)) {
    std::lock_guard<std::mutex> l(blkcg_tree_lock());
    return root_iostat(q) + iocost_stat_keys(q, nullptr);
  }
  uint64_t bytes[kIostatNr] = {}, ios[kIostatNr] = {};
  // Held from the lookup on, so the group cannot be removed meanwhile.
  std::lock_guard<std::mutex> l(blkcg_tree_lock());
  IoGroup* g = io_group_find_locked(path);
  if (!g) return no_group(rest);
  // Hierarchical, as cgroup v2's io.stat: the group and every descendant.
  for (const Blkg* b : q->blkgs_) {
    if (!in_subtree(b->group, g)) continue;
    for (unsigned t = 0; t < kIostatNr; t++) {
      bytes[t] += b->bytes[t].load(std::memory_order_relaxed);
      ios[t] += b->ios[t].load(std::memory_order_relaxed);
    }
  }
  const Blkg* own = blkg_of(q, g);
  return iostat_line(q, bytes, ios) + iolatency_stat_keys(q, own) + iocost_stat_keys(q, own);
}

}  // namespace

Result<std::string> blkcg_attr_show(const QueueImpl* q, std::string_view rest) {
  std::string_view path, file;
  if (!split_attr(rest, &path, &file))
    return Status::invalid("cgroup/" + std::string(rest) + ": expected cgroup/<group path>/io.stat or io.max");
  if (file == kIoStat) return iostat_show(q, rest, path);
  // cgroup v2 has no io.max in the root: the root is never limited.
  if (is_root_path(path)) return no_group(rest);
  std::lock_guard<std::mutex> l(blkcg_tree_lock());
  IoGroup* g = io_group_find_locked(path);
  if (!g) return no_group(rest);
  return throtl_iomax_show(q, blkg_of(q, g));
}

Status blkcg_attr_store(QueueImpl* q, std::string_view rest, std::string_view value) {
  std::string_view path, file;
  if (!split_attr(rest, &path, &file) || file != kIoMax || is_root_path(path))
    return Status::invalid("cgroup/" + std::string(rest) + ": read-only attribute (only a group's io.max is written)");
  Result<ThrotlConf> c = throtl_iomax_parse(value);
  if (!c) return c.status();
  if (Result<IoGroup*> made = io_group_create(path); !made) return made.status();
  std::lock_guard<std::mutex> l(blkcg_tree_lock());
  IoGroup* g = io_group_find_locked(path);
  if (!g) return no_group(rest);  // removed since it was made
  // The limits live in the blkg, made now if no bio made it yet (the
  // kernel's blkg_conf_prep does the same).
  throtl_iomax_apply(q, blkg_create_locked(q, g), *c);
  return Status::OK();
}

std::vector<std::string> blkcg_attr_names() {
  std::vector<std::string> out;
  for (const std::string& p : io_group_list()) {
    if (p == "/") {
      out.push_back("cgroup/io.stat");
      continue;
    }
    out.push_back("cgroup" + p + "/io.stat");
    out.push_back("cgroup" + p + "/io.max");
  }
  return out;
}

}  // namespace blkmq

// The I/O group tree (blkcg's cgroup side): paths, creation, removal, and
// contexts' membership.
#include <algorithm>
#include <cerrno>
#include <mutex>

#include "qos/blkcg.h"

namespace blkmq {
namespace {

// Never destroyed: contexts leave their groups when threads exit, which may
// be after main returns.
IoGroup* make_root() {
  auto* g = new IoGroup;
  g->ref.store(1 << 30);  // the root is never freed
  return g;
}

IoGroup* root_group() {
  static IoGroup* root = make_root();
  return root;
}

// The kernel refuses '/' and newlines in a cgroup name; blkmq also refuses
// blanks and control characters, which would break io.stat's paths and the
// attribute list.
bool name_ok(std::string_view n) {
  if (n.empty() || n.size() > 255 || n == "." || n == "..") return false;
  return std::all_of(n.begin(), n.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u > ' ' && u != 0x7f && c != '/';
  });
}

// Splits "/a/b" (leading '/' optional, one trailing '/' allowed) into its
// names; the root is an empty list.
Result<std::vector<std::string_view>> split_path(std::string_view path) {
  std::vector<std::string_view> names;
  if (!path.empty() && path.front() == '/') path.remove_prefix(1);
  if (!path.empty() && path.back() == '/') path.remove_suffix(1);
  while (!path.empty()) {
    const size_t slash = path.find('/');
    const std::string_view n = path.substr(0, slash);
    if (!name_ok(n))
      return Status::invalid("I/O group name '" + std::string(n) +
                             "': 1 to 255 bytes, not '.' or '..', without '/', blanks or control characters");
    names.push_back(n);
    path = slash == std::string_view::npos ? std::string_view{} : path.substr(slash + 1);
  }
  return names;
}

IoGroup* child_named(const IoGroup* g, std::string_view name) {
  for (IoGroup* c : g->children)
    if (c->name == name) return c;
  return nullptr;
}

// Under the tree mutex.
IoGroup* walk(const std::vector<std::string_view>& names) {
  IoGroup* g = root_group();
  for (std::string_view n : names)
    if (!(g = child_named(g, n))) return nullptr;
  return g;
}

void list_below(const IoGroup* g, std::vector<std::string>& out) {
  std::vector<IoGroup*> kids = g->children;
  std::sort(kids.begin(), kids.end(), [](const IoGroup* a, const IoGroup* b) { return a->name < b->name; });
  for (const IoGroup* c : kids) {
    out.push_back(io_group_path(c));
    list_below(c, out);
  }
}

}  // namespace

std::atomic<int> g_io_group_members{0};

std::mutex& blkcg_tree_lock() {
  static auto* m = new std::mutex;  // never destroyed, as the root
  return *m;
}

void io_group_get(IoGroup* g) { g->ref.fetch_add(1, std::memory_order_relaxed); }

void io_group_put(IoGroup* g) {
  while (g && g->ref.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    IoGroup* parent = g->parent;
    delete g;
    g = parent;
  }
}

IoGroup* io_group_root() { return root_group(); }

Status io_group_check_path(std::string_view path) {
  auto names = split_path(path);
  return names ? Status::OK() : names.status();
}

Result<IoGroup*> io_group_create(std::string_view path) {
  auto names = split_path(path);
  if (!names) return names.status();
  std::lock_guard<std::mutex> l(blkcg_tree_lock());
  IoGroup* g = root_group();
  for (std::string_view n : *names) {
    IoGroup* c = child_named(g, n);
    if (!c) {
      c = new IoGroup;
      c->name = std::string(n);
      c->parent = g;
      io_group_get(g);
      g->children.push_back(c);
    }
    g = c;
  }
  return g;
}

IoGroup* io_group_find_locked(std::string_view path) {
  auto names = split_path(path);
  return names ? walk(*names) : nullptr;
}

IoGroup* io_group_find(std::string_view path) {
  std::lock_guard<std::mutex> l(blkcg_tree_lock());
  return io_group_find_locked(path);
}

Status io_group_remove(std::string_view path) {
  auto names = split_path(path);
  if (!names) return names.status();
  if (names->empty()) return Status::invalid("the root I/O group cannot be removed");
  std::unique_lock<std::mutex> l(blkcg_tree_lock());
  IoGroup* g = walk(*names);
  const std::string p = "I/O group '" + std::string(path) + "'";
  if (!g) return Status::error(ENOENT, p + " does not exist");
  if (!g->children.empty()) return Status::error(EBUSY, p + " has child groups; remove them first");
  if (g->members.load()) return Status::error(EBUSY, p + " still has I/O contexts in it; move them out first");
  g->online = false;
  auto& sib = g->parent->children;
  sib.erase(std::remove(sib.begin(), sib.end(), g), sib.end());
  // Its blkgs die now (blkg_destroy at css offline); bios in flight keep
  // them, and the group, until they end.
  g->blkg_lock.lock();
  const std::vector<Blkg*> dying = g->blkgs;
  g->blkg_lock.unlock();
  for (Blkg* b : dying) blkg_unlink_locked(b);
  l.unlock();
  for (Blkg* b : dying) blkg_put(b);
  io_group_put(g);  // the tree's link
  return Status::OK();
}

std::string io_group_path(const IoGroup* g) {
  if (!g || !g->parent) return "/";
  std::string p;
  for (; g->parent; g = g->parent) p = "/" + g->name + p;
  return p;
}

std::vector<std::string> io_group_list() {
  std::vector<std::string> out{"/"};
  std::lock_guard<std::mutex> l(blkcg_tree_lock());
  list_below(root_group(), out);
  return out;
}

Status io_context_set_group(IoContext* ioc, IoGroup* g) {
  if (g == root_group()) g = nullptr;
  IoGroup* old = ioc->group;
  if (old == g) return Status::OK();
  {
    // Under the tree mutex, against io_group_remove's member check.
    std::lock_guard<std::mutex> l(blkcg_tree_lock());
    if (g && !g->online) return Status::error(ENOENT, "I/O group '" + io_group_path(g) + "' was removed");
    if (g) {
      g->members.fetch_add(1, std::memory_order_relaxed);
      g_io_group_members.fetch_add(1, std::memory_order_relaxed);
      io_group_get(g);
    }
    if (old) {
      old->members.fetch_sub(1, std::memory_order_relaxed);
      g_io_group_members.fetch_sub(1, std::memory_order_relaxed);
    }
    ioc->group = g;
  }
  if (old) io_group_put(old);
  return Status::OK();
}

IoGroup* io_context_group(const IoContext* ioc) { return ioc->group ? ioc->group : root_group(); }

IoGroup* bio_io_group(const Bio* bio) { return bio->blkg ? bio->blkg->group : nullptr; }

IoGroup* io_group_parent(const IoGroup* g) { return g->parent; }

bool io_group_online(const IoGroup* g) { return g->online.load(std::memory_order_acquire); }

unsigned io_group_bfq_weight(const IoGroup* g) { return g->bfq_weight.load(std::memory_order_relaxed); }

Status io_group_set_bfq_weight(IoGroup* g, unsigned weight) {
  if (!g->parent) return Status::invalid("the root I/O group has no io.bfq.weight");
  if (weight < kIoGroupWeightMin || weight > kIoGroupWeightMax)
    return Status::invalid("io.bfq.weight: " + std::to_string(weight) + " is out of range 1..1000");
  g->bfq_weight.store(weight, std::memory_order_relaxed);
  return Status::OK();
}

unsigned io_group_cost_weight(const IoGroup* g) { return g->cost_weight.load(std::memory_order_relaxed); }

Status io_group_set_cost_weight(IoGroup* g, unsigned weight) {
  if (!g->parent) return Status::invalid("the root I/O group has no io.weight");
  if (weight < kIoGroupWeightMin || weight > kIoGroupCostWeightMax)
    return Status::invalid("io.weight: " + std::to_string(weight) + " is out of range 1..10000");
  g->cost_weight.store(weight, std::memory_order_relaxed);
  return Status::OK();
}

}  // namespace blkmq

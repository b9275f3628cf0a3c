#include "base/radix_index.h"

#include <algorithm>
#include <bit>
#include <new>
#include <utility>

namespace blkmq::base {

namespace {

// Levels that keys up to `key` need: at least one, so a lookup always ends
// at a value slot.
unsigned levels_for(uint64_t key) {
  const auto bits = static_cast<unsigned>(std::bit_width(key | 1));
  return (bits + RadixIndex::kBits - 1) / RadixIndex::kBits;
}

}  // namespace

RadixIndex::RadixIndex(uint64_t nr_keys) : limit_(nr_keys) { set_levels(1); }

void RadixIndex::set_levels(unsigned levels) {
  levels_ = levels;
  top_shift_ = (levels - 1) * kBits;
  const unsigned bits = levels * kBits;
  end_ = bits >= 64 ? limit_ : std::min(limit_, uint64_t{1} << bits);
}

// Adds levels on top until key fits. False if a node cannot be allocated
// (the levels added so far stay: each is a valid tree).
bool RadixIndex::grow_to(uint64_t key) {
  if (!root_) {
    set_levels(levels_for(key));
    return true;
  }
  while (key >= end_) {
    auto* top = new (std::nothrow) Node;
    if (!top) return false;
    top->slot[0] = root_;
    top->used = 1;
    root_ = top;
    set_levels(levels_ + 1);
  }
  return true;
}

RadixIndex::~RadixIndex() { clear(nullptr); }

RadixIndex::RadixIndex(RadixIndex&& o) noexcept
    : root_(std::exchange(o.root_, nullptr)),
      limit_(std::exchange(o.limit_, 0)),
      size_(std::exchange(o.size_, 0)),
      levels_(o.levels_),
      top_shift_(o.top_shift_) {
  end_ = o.end_;
  o.set_levels(1);
}

RadixIndex& RadixIndex::operator=(RadixIndex&& o) noexcept {
  if (this != &o) {
    clear(nullptr);
    root_ = std::exchange(o.root_, nullptr);
    limit_ = std::exchange(o.limit_, 0);
    size_ = std::exchange(o.size_, 0);
    levels_ = o.levels_;
    top_shift_ = o.top_shift_;
    end_ = o.end_;
    o.set_levels(1);
  }
  return *this;
}

bool RadixIndex::store(uint64_t key, void* value, void** old) {
  if (key >= limit_ || !value) return false;
  if (key >= end_ && !grow_to(key)) return false;
  if (!root_) root_ = new (std::nothrow) Node;
  if (!root_) return false;
  Node* path[kMaxLevels];
  Node* n = root_;
  for (unsigned level = 0;; level++) {
    path[level] = n;
    void*& s = n->slot[index(key, level)];
    if (level + 1 == levels_) {
      *old = s;
      if (!s) {
        n->used++;
        size_++;
      }
      s = value;
      return true;
    }
    if (!s) {
      auto* child = new (std::nothrow) Node;
      if (!child) {
        // Nothing was stored: the nodes made on the way down are empty.
        prune(key, path, level + 1);
        return false;
      }
      s = child;
      n->used++;
    }
    n = static_cast<Node*>(s);
  }
}

void* RadixIndex::erase(uint64_t key) {
  if (key >= end_) return nullptr;
  Node* path[kMaxLevels];
  Node* n = root_;
  for (unsigned level = 0; n; level++) {
    path[level] = n;
    void*& s = n->slot[index(key, level)];
    if (level + 1 == levels_) {
      void* v = s;
      if (!v) return nullptr;
      s = nullptr;
      n->used--;
      size_--;
      prune(key, path, level + 1);
      return v;
    }
    n = static_cast<Node*>(s);
  }
  return nullptr;
}

// path[0..depth) are the nodes on key's way down, root first. Frees the
// empty ones from the bottom, unlinking each from its parent, and stops at
// the first that still holds something.
void RadixIndex::prune(uint64_t key, Node* const* path, unsigned depth) {
  for (unsigned level = depth; level-- > 0;) {
    if (path[level]->used) return;
    delete path[level];
    if (level == 0) {
      root_ = nullptr;
      set_levels(1);
    } else {
      path[level - 1]->slot[index(key, level - 1)] = nullptr;
      path[level - 1]->used--;
    }
  }
}

// The lowest stored key >= from under n (at `level`), whose keys share
// from's bits above this level.
void* RadixIndex::first_from(const Node* n, unsigned level, uint64_t from, uint64_t* found) const {
  const unsigned shift = top_shift_ - level * kBits;
  // from's bits of this level and below, cleared for the slots after the first.
  const uint64_t below = (uint64_t{kFanout - 1} << shift) | ((uint64_t{1} << shift) - 1);
  const unsigned first = index(from, level);
  for (unsigned i = first; i < kFanout; i++) {
    void* s = n->slot[i];
    if (!s) continue;
    const uint64_t sub = i == first ? from : (from & ~below) | (uint64_t{i} << shift);
    if (level + 1 == levels_) {
      *found = sub;
      return s;
    }
    if (void* v = first_from(static_cast<const Node*>(s), level + 1, sub, found)) return v;
  }
  return nullptr;
}

void* RadixIndex::next(uint64_t* key) const {
  if (!root_ || *key >= end_) return nullptr;
  uint64_t found = 0;
  void* v = first_from(root_, 0, *key, &found);
  if (v) *key = found;
  return v;
}

void RadixIndex::free_subtree(Node* n, unsigned levels_below, void (*drop)(void*)) {
  for (void* s : n->slot) {
    if (!s) continue;
    if (levels_below == 0) {
      if (drop) drop(s);
    } else {
      free_subtree(static_cast<Node*>(s), levels_below - 1, drop);
    }
  }
  delete n;
}

void RadixIndex::clear(void (*drop)(void*)) {
  if (root_) free_subtree(root_, levels_ - 1, drop);
  root_ = nullptr;
  size_ = 0;
  set_levels(1);
}

}  // namespace blkmq::base

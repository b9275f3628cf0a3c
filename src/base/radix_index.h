// A radix tree from integer keys below a fixed limit to pointers: 64-way
// nodes, as many levels as the largest key stored needs (6 bits a level, at
// most what the limit needs), so a lookup is one dependent load per level
// and no hashing, and small keys stay shallow in a large key space. Used where a hash
// map keyed by a dense-ish index (a page number) would hash on every access.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>

namespace blkmq::base {

// Untyped index of non-null void* values; it never frees a value (see
// RadixMap for the owning form). Not thread-safe: the caller locks. Nodes
// are allocated on the way down to a new key and freed as soon as they hold
// nothing, so memory follows what is stored, not the limit. A key beyond
// the current height adds levels on top (the old root becomes slot 0 of
// the new one); the height drops back only when the tree empties.
class RadixIndex {
 public:
  static constexpr unsigned kBits = 6;
  static constexpr unsigned kFanout = 1u << kBits;

  // Keys are [0, nr_keys). nr_keys 0: nothing can be stored.
  explicit RadixIndex(uint64_t nr_keys = 0);
  // Frees the nodes, not the values (clear() them first if they are owned).
  ~RadixIndex();
  RadixIndex(const RadixIndex&) = delete;
  RadixIndex& operator=(const RadixIndex&) = delete;
  // Moves take the nodes and the limit; the source is left empty, limit 0.
  // Assigning over a non-empty index frees its nodes, not its values.
  RadixIndex(RadixIndex&& o) noexcept;
  RadixIndex& operator=(RadixIndex&& o) noexcept;

  // The value at key, nullptr if none (or key out of range).
  void* find(uint64_t key) const {
    if (key >= end_) return nullptr;
    const Node* n = root_;
    for (unsigned shift = top_shift_; n; shift -= kBits) {
      void* s = n->slot[(key >> shift) & (kFanout - 1)];
      if (shift == 0) return s;
      n = static_cast<const Node*>(s);
    }
    return nullptr;
  }
  // Stores value (non-null) at key, allocating the missing nodes; *old gets
  // what key held, nullptr if nothing. False, and nothing changed, when key
  // is out of range or a node cannot be allocated.
  bool store(uint64_t key, void* value, void** old);
  // Removes key's value and returns it (nullptr if none); frees the nodes
  // this leaves empty.
  void* erase(uint64_t key);
  // The stored key >= *key with the lowest number: its value, the key in
  // *key. nullptr (and *key unchanged) when there is none.
  // Cost: up to 64 slots per level visited, empty subtrees skipped.
  void* next(uint64_t* key) const;
  // Removes everything; drop (if not null) is called on every value first.
  void clear(void (*drop)(void*));

  size_t size() const { return size_; }
  uint64_t limit() const { return limit_; }
  // The current height (1 when empty).
  unsigned levels() const { return levels_; }

 private:
  // Interior slots point to child nodes; the last level's slots are values.
  struct Node {
    void* slot[kFanout] = {};
    unsigned used = 0;  // non-null slots, to free the node when it empties
  };
  static constexpr unsigned kMaxLevels = (64 + kBits - 1) / kBits;

  unsigned index(uint64_t key, unsigned level) const {
    return static_cast<unsigned>(key >> (top_shift_ - level * kBits)) & (kFanout - 1);
  }
  void set_levels(unsigned levels);
  bool grow_to(uint64_t key);
  void prune(uint64_t key, Node* const* path, unsigned depth);
  void* first_from(const Node* n, unsigned level, uint64_t from, uint64_t* found) const;
  static void free_subtree(Node* n, unsigned levels_below, void (*drop)(void*));

  Node* root_ = nullptr;
  uint64_t limit_ = 0;
  uint64_t end_ = 0;  // keys below this fit the current height (and limit)
  size_t size_ = 0;
  unsigned levels_ = 1;
  unsigned top_shift_ = 0;
};

// A RadixIndex that owns its values, each freed by `Free` (by default
// delete; a stateful Free, such as a pool's, is kept by the map and used
// for every value it frees). Not thread-safe: the caller locks.
template <typename T, typename Free = std::default_delete<T>>
class RadixMap {
 public:
  using Owned = std::unique_ptr<T, Free>;

  explicit RadixMap(uint64_t nr_keys = 0, Free free = Free()) : index_(nr_keys), free_(free) {}
  ~RadixMap() { clear(); }
  RadixMap(const RadixMap&) = delete;
  RadixMap& operator=(const RadixMap&) = delete;
  RadixMap(RadixMap&&) noexcept = default;
  // Frees what this map held, then takes o's contents and its Free.
  RadixMap& operator=(RadixMap&& o) noexcept {
    if (this != &o) {
      clear();
      index_ = std::move(o.index_);
      free_ = o.free_;
    }
    return *this;
  }

  T* find(uint64_t key) const { return static_cast<T*>(index_.find(key)); }
  // Stores v's object at key and hands back in v what key held (empty if
  // nothing). False, v unchanged, if v is empty, key is out of range or a
  // node cannot be allocated.
  bool put(uint64_t key, Owned& v) {
    void* old = nullptr;
    if (!v || !index_.store(key, v.get(), &old)) return false;
    v.release();
    v.reset(static_cast<T*>(old));
    return true;
  }
  // Removes key's object and returns it (empty if none).
  Owned take(uint64_t key) { return Owned(static_cast<T*>(index_.erase(key)), free_); }
  // Moves key's object to the same key of `to`, freeing what `to` held
  // there. True if done or nothing is at key; false, both maps unchanged,
  // if `to` cannot grow. The object never changes address or owner twice,
  // so a failure loses nothing. Both maps must free alike (the same pool).
  bool move_entry(uint64_t key, RadixMap& to) {
    void* v = index_.find(key);
    if (!v) return true;
    void* old = nullptr;
    if (!to.index_.store(key, v, &old)) return false;
    index_.erase(key);
    if (old) to.free_(static_cast<T*>(old));
    return true;
  }
  // See RadixIndex::next.
  T* next(uint64_t* key) const { return static_cast<T*>(index_.next(key)); }
  void clear() {
    if constexpr (std::is_empty_v<Free>) {
      index_.clear([](void* p) { Free()(static_cast<T*>(p)); });
    } else {
      // A stateful Free cannot ride RadixIndex::clear's plain function
      // pointer: take the values out one by one (next and erase each).
      for (uint64_t key = 0; T* v = next(&key);) {
        index_.erase(key);
        free_(v);
      }
    }
  }

  size_t size() const { return index_.size(); }
  bool empty() const { return index_.size() == 0; }
  uint64_t limit() const { return index_.limit(); }
  unsigned levels() const { return index_.levels(); }

 private:
  RadixIndex index_;
  [[no_unique_address]] Free free_;
};

}  // namespace blkmq::base

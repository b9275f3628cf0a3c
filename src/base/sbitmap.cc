// Sbitmap: the word-level allocator. See sbitmap_queue.cc for the queue of
// waiters built on top of it.
#include "base/sbitmap.h"

#include <algorithm>
#include <cassert>

#include <sched.h>

#include "base/spinlock.h"

namespace blkmq::base {

namespace {

constexpr unsigned kBitsPerLong = 64;

// The kernel's default: a full 64-bit word, but shrunk until the map has
// about four words, so that a small map still spreads CPUs across cache
// lines instead of piling every allocation onto one word.
unsigned calc_shift(unsigned depth) {
  unsigned shift = 6;
  if (depth >= 4) {
    while (shift > 0 && (4u << shift) > depth) shift--;
  }
  return shift;
}

uint64_t low_mask(unsigned nbits) {
  return nbits >= kBitsPerLong ? ~0ull : (1ull << nbits) - 1;
}

// The bits of a word a search looks at: [0, depth), minus the bits below the
// hint when the search does not wrap around.
uint64_t search_range(unsigned depth, unsigned hint, bool wrap) {
  uint64_t range = low_mask(depth);
  if (!wrap && hint) range &= ~low_mask(hint);
  return range;
}

// The fold is two atomic ops long, so spinning is the common case; yield
// after a while in case the folder was preempted in between.
void lock_word(std::atomic<bool>& l) {
  unsigned spins = 0;
  while (l.exchange(true, std::memory_order_acquire)) {
    while (l.load(std::memory_order_relaxed)) {
      if (++spins < 100) {
        cpu_relax();
      } else {
        sched_yield();
      }
    }
  }
}

}  // namespace

Sbitmap::Sbitmap(unsigned depth, int shift, bool round_robin)
    : depth_(depth),
      max_depth_(depth),
      shift_(shift < 0 ? calc_shift(depth) : std::min<unsigned>(shift, 6)),
      map_nr_((depth + (1u << shift_) - 1) >> shift_),
      round_robin_(round_robin),
      map_(new Word[map_nr_]) {}

Sbitmap::~Sbitmap() = default;

unsigned Sbitmap::word_depth(unsigned i, unsigned depth) const {
  unsigned first = i << shift_;
  if (first >= depth) return 0;
  return std::min(depth - first, 1u << shift_);
}

// 6.17 semantics: shallow_depth limits the whole map. Each word gets its
// proportional share word_depth * shallow / depth; the remainders are handed
// out one bit at a time to the leading words, so small limits (even 1) are
// honoured instead of allowing one bit per word.
unsigned Sbitmap::shallow_word_depth(unsigned i, unsigned depth, unsigned shallow) const {
  unsigned wd = word_depth(i, depth);
  if (shallow >= depth) return wd;
  uint64_t scaled = uint64_t{wd} * shallow;
  unsigned share = static_cast<unsigned>(scaled / depth);
  uint64_t rest = scaled % depth;
  if (rest >= uint64_t{i + 1} * wd) share++;
  return share;
}

// Moves freed bits from `cleared` back into `word`. Returns true if the
// caller should search the word again: either bits were folded, or another
// allocator finished folding and the word now has free bits in `range`.
bool Sbitmap::deferred_clear(Word& w, uint64_t range) {
  lock_word(w.swap_lock);
  bool retry;
  if (w.cleared.load(std::memory_order_relaxed) == 0) {
    retry = (w.word.load(std::memory_order_relaxed) & range) != range;
  } else {
    // acq_rel: the exchange acquires the freers' writes (pairs with
    // sbitmap.h:clear_bit and sbitmap.cc:clear_mask), the and-not releases
    // them to whoever allocates these bits next (the acquire fetch_or of
    // this file's get paths).
    uint64_t mask = w.cleared.exchange(0, std::memory_order_acq_rel);
    w.word.fetch_and(~mask, std::memory_order_acq_rel);
    retry = true;
  }
  w.swap_lock.store(false, std::memory_order_release);
  return retry;
}

int Sbitmap::get_from_word(unsigned index, unsigned depth, unsigned hint, bool wrap) {
  Word& w = map_[index];
  if (hint >= depth) hint = 0;
  for (;;) {
    uint64_t range = search_range(depth, hint, wrap);
    uint64_t cur = w.word.load(std::memory_order_relaxed);
    for (;;) {
      uint64_t free = ~cur & range & ~low_mask(hint);
      if (!free && wrap && hint) free = ~cur & range;  // wrap to the start
      if (!free) break;
      unsigned nr = static_cast<unsigned>(__builtin_ctzll(free));
      uint64_t bit = 1ull << nr;
      cur = w.word.fetch_or(bit, std::memory_order_acquire);
      if (!(cur & bit)) return static_cast<int>(nr);
      cur |= bit;  // lost the race; retry with the fresher view
    }
    if (!deferred_clear(w, range)) return -1;
  }
}

int Sbitmap::find_bit(unsigned depth, unsigned shallow, unsigned index, unsigned hint,
                      bool wrap) {
  unsigned nr_words = (depth + (1u << shift_) - 1) >> shift_;
  if (index >= nr_words) index = 0;
  // Without wrapping the first word's bits below the hint are only reached
  // by coming back to it at the end (the kernel skips them, which can make a
  // round-robin get fail while a bit is free).
  unsigned rounds = nr_words + ((!wrap && hint) ? 1 : 0);
  for (unsigned i = 0; i < rounds; i++) {
    unsigned wd = shallow_word_depth(index, depth, shallow);
    if (wd) {
      int nr = get_from_word(index, wd, hint, wrap);
      if (nr >= 0) return nr + static_cast<int>(index << shift_);
    }
    hint = 0;
    if (++index >= nr_words) index = 0;
  }
  return -1;
}

int Sbitmap::get(unsigned hint) {
  unsigned depth = depth_.load(std::memory_order_relaxed);
  if (depth == 0) return -1;
  if (hint >= depth) hint = 0;
  unsigned index = hint >> shift_;
  // Outside round-robin mode the hint only picks the word; searching each
  // word from its start keeps allocations dense.
  if (!round_robin_) {
    // The common case first: a free bit in the hinted word, as find_bit's
    // first step would take it, without its set-up.
    const unsigned first = index << shift_;
    Word& w = map_[index];
    const uint64_t free = ~w.word.load(std::memory_order_relaxed) & low_mask(std::min(depth - first, 1u << shift_));
    if (free) {
      const unsigned nr = static_cast<unsigned>(__builtin_ctzll(free));
      if (!(w.word.fetch_or(1ull << nr, std::memory_order_acquire) & (1ull << nr))) return static_cast<int>(first + nr);
    }
  }
  unsigned in_word = round_robin_ ? hint & ((1u << shift_) - 1) : 0;
  return find_bit(depth, depth, index, in_word, !round_robin_);
}

int Sbitmap::get_shallow(unsigned hint, unsigned shallow_depth) {
  unsigned depth = depth_.load(std::memory_order_relaxed);
  if (depth == 0 || shallow_depth == 0) return -1;
  if (hint >= depth) hint = 0;
  return find_bit(depth, shallow_depth, hint >> shift_, hint & ((1u << shift_) - 1), true);
}

uint64_t Sbitmap::get_batch(unsigned nr, unsigned* offset) { return get_batch(nr, offset, 0); }

uint64_t Sbitmap::get_batch(unsigned nr, unsigned* offset, unsigned hint) {
  unsigned depth = depth_.load(std::memory_order_relaxed);
  if (depth == 0 || nr == 0) return 0;
  nr = std::min(nr, 1u << shift_);
  unsigned nr_words = (depth + (1u << shift_) - 1) >> shift_;
  unsigned index = hint < depth ? hint >> shift_ : 0;
  for (unsigned i = 0; i < nr_words; i++) {
    if (i && ++index >= nr_words) index = 0;
    Word& w = map_[index];
    uint64_t range = low_mask(word_depth(index, depth));
    uint64_t cur = w.word.load(std::memory_order_relaxed);
    if ((cur & range) == range) {
      if (!deferred_clear(w, range)) continue;
      cur = w.word.load(std::memory_order_relaxed);
    }
    uint64_t free = ~cur & range;
    if (!free) continue;
    // Take the free bits of the nr-bit window that starts at the first
    // free bit: one atomic op, and the bits taken are near each other.
    unsigned first = static_cast<unsigned>(__builtin_ctzll(free));
    uint64_t want = (low_mask(nr) << first) & free;
    uint64_t old = w.word.fetch_or(want, std::memory_order_acquire);
    uint64_t got = want & ~old;
    if (got) {
      *offset = index << shift_;
      return got;
    }
  }
  return 0;
}

void Sbitmap::clear_mask(unsigned word_first, uint64_t mask) {
  assert((word_first >> shift_) < map_nr_);
  // As clear_bit (sbitmap.h): pairs with sbitmap_queue.cc:add_wait through
  // clear_batch's ws_active_ read, and with deferred_clear.
  map_[word_first >> shift_].cleared.fetch_or(mask, std::memory_order_seq_cst);
}

bool Sbitmap::test_bit(unsigned bit) const {
  if ((bit >> shift_) >= map_nr_) return false;
  const Word& w = map_[bit >> shift_];
  uint64_t mask = 1ull << (bit & ((1u << shift_) - 1));
  return (w.word.load(std::memory_order_acquire) & ~w.cleared.load(std::memory_order_acquire) &
          mask) != 0;
}

bool Sbitmap::any_bit_set() const {
  for (unsigned i = 0; i < map_nr_; i++) {
    if (map_[i].word.load(std::memory_order_acquire) &
        ~map_[i].cleared.load(std::memory_order_acquire))
      return true;
  }
  return false;
}

unsigned Sbitmap::weight() const {
  unsigned n = 0;
  for (unsigned i = 0; i < map_nr_; i++) {
    n += static_cast<unsigned>(__builtin_popcountll(
        map_[i].word.load(std::memory_order_acquire) &
        ~map_[i].cleared.load(std::memory_order_acquire)));
  }
  return n;
}

void Sbitmap::resize(unsigned depth) {
  depth = std::min(depth, max_depth_);
  // Fold every pending free first so a shrink does not strand freed bits
  // in words that allocators no longer visit.
  for (unsigned i = 0; i < map_nr_; i++) deferred_clear(map_[i], 0);
  depth_.store(depth, std::memory_order_relaxed);
}

}  // namespace blkmq::base

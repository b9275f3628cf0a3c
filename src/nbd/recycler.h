// Blocks of memory that one thread takes and any thread gives back, kept
// for the taker instead of going back to the allocator. On an NBD
// connection the reader allocates each request's state and payload buffer
// and the writer frees them: through glibc that is a cross-thread free,
// which takes the allocating thread's arena lock on both sides (about 14 %
// of a one-connection randwrite run's cycles, perf; docs/PERFORMANCE.md
// §12). Here the giver pushes onto a lock-free list and the taker takes the
// whole list at once when its own runs out, so neither waits on the other.
//
// Nothing is given back to the allocator before the Recycler goes: it
// keeps at most what its taker had live at once, which a connection's
// limits on requests and bytes in flight already bound.
#pragma once

#include "base/llist.h"

namespace blkmq::nbd {

class Recycler {
 public:
  // `release` frees one block for good (the destructor's).
  explicit Recycler(void (*release)(void*)) : release_(release) {}
  // Frees what is kept. Every block given out must have come back, or be
  // freed by its holder with `release`.
  ~Recycler() {
    for (Block* b : {local_, shared_.take_all()}) {
      while (b) {
        Block* next = b->next;
        release_(b);
        b = next;
      }
    }
  }
  Recycler(const Recycler&) = delete;
  Recycler& operator=(const Recycler&) = delete;

  // A kept block, or null: allocate one. The taker's thread only (one
  // thread for the Recycler's life); a pointer swap, and one atomic
  // exchange when the taker's own list is empty.
  void* take() {
    if (!local_) local_ = shared_.take_all();
    Block* b = local_;
    if (b) local_ = b->next;
    return b;
  }
  // Keeps p, a block of at least pointer size that the taker may hand out
  // again. Any thread; one compare-and-swap.
  void give(void* p) { shared_.push(static_cast<Block*>(p)); }

 private:
  struct Block {
    Block* next;
  };
  void (*const release_)(void*);
  Block* local_ = nullptr;  // the taker's
  base::LList<Block, &Block::next> shared_;
};

}  // namespace blkmq::nbd

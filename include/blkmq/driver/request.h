// The request: what the core hands to a driver. One request carries one or
// more merged bios that are contiguous on the device.
#pragma once

#include <atomic>
#include <cstdint>

#include "blkmq/bio.h"
#include "blkmq/driver/list.h"
#include "blkmq/elevator/rbtree.h"

namespace blkmq {

class Queue;
struct HwCtx;
struct SwCtx;

constexpr int kNoTag = -1;

// Request state, as the kernel's rq->state.
enum class RqState : uint8_t { idle = 0, in_flight = 1, complete = 2 };

// Request flags (RQF_* analogues). Owned by the core and the scheduler.
enum RqFlag : uint32_t {
  kRqfSchedTags = 1u << 0,   // allocated from scheduler tags
  kRqfUseSched = 1u << 1,    // goes through the elevator
  kRqfResv = 1u << 2,        // reserved tag
  kRqfStarted = 1u << 3,     // the scheduler handed it out
  kRqfFlushSeq = 1u << 4,    // owned by the flush state machine
  kRqfDontPrep = 1u << 5,    // the driver has prepared it; requeue bypasses merging
  kRqfIoStat = 1u << 7,      // accounted in the disk stat
  kRqfStats = 1u << 8,       // io_start_time_ns is valid
  kRqfElvHashed = 1u << 10,  // in the elevator's back-merge hash
  kRqfNoMerge = 1u << 11,    // no further merges into this request
  kRqfPassthrough = 1u << 12,  // a driver-private command (Queue::alloc_request)
};

// Requests live in per-tag arrays allocated when the tag set or scheduler is
// set up; nothing here is allocated per I/O. The driver's per-request payload
// (TagSetConfig::cmd_size bytes) follows the struct: see pdu().
//
// Who owns what. The sections below say who writes each field; everyone
// else only reads it, and only where its comment allows. A driver writes
// nothing here but its pdu() (and data_len through update_request); a
// scheduler writes only its own section; the rest is the core's.
struct alignas(64) Request {
  // ---- identity: the core's, fixed while the request is allocated ----
  Queue* q = nullptr;
  HwCtx* mq_hctx = nullptr;
  SwCtx* mq_ctx = nullptr;
  int tag = kNoTag;            // driver tag, kNoTag until one is assigned
  int internal_tag = kNoTag;   // scheduler tag, kNoTag without a scheduler

  // ---- what to do: the core's; the driver reads them in queue_rq ----
  ReqOp op = ReqOp::read;
  uint32_t cmd_flags = 0;      // BioFlag bits
  uint32_t rq_flags = 0;       // RqFlag bits (the core's and the scheduler's)
  uint16_t ioprio = 0;
  uint16_t nr_phys_segments = 0;
  uint64_t sector = 0;         // start sector (512 B)
  uint32_t data_len = 0;       // bytes remaining; a discard's or write-zeroes' length too (driver.h)
  Bio* bio = nullptr;          // first bio of the chain
  Bio* biotail = nullptr;
  IoContext* ioc = nullptr;    // the I/O context of the first bio

  // ---- state, timing and accounting: the core's alone ----
  // (A driver may read status in its complete hook and deadline_ns;
  // schedulers may read start_time_ns and io_start_time_ns.)
  std::atomic<RqState> state{RqState::idle};
  std::atomic<int> ref{0};     // pins the request for tag iteration and timeouts
  std::atomic<uint8_t> timed_out{0};  // the timeout handler ran for this issue
  std::atomic<uint8_t> acct{0};       // counted in flight: 1 read, 2 write (inflight, io_ticks)
  uint64_t deadline_ns = 0;    // timeout deadline (monotonic ns), 0 = none
  uint32_t timeout_ms = 0;     // 0: the queue's io_timeout
  uint16_t requeue_count = 0;
  int budget_token = -1;       // dispatch budget held (DriverOps::get_budget)
  unsigned submit_cpu = 0;     // CPU whose ctx it came from; completion affinity
  uint64_t start_time_ns = 0;  // allocation/accounting start (0 with gtod_reduce-like stats off)
  uint64_t io_start_time_ns = 0;  // issue to the driver (kRqfStats)
  BlkStatus status = BlkStatus::ok;  // end status set by complete/timeout paths

  // ---- linkage: queuelist and rq_next belong to whoever holds the
  // request (ctx, dispatch or requeue list, the scheduler, a plug, a
  // completion list); hash_node to the core's back-merge hash ----
  ListNode queuelist;          // ctx, dispatch, scheduler, requeue lists
  Request* rq_next = nullptr;  // singly linked lists: plug, batches, completion lists
  ListNode hash_node;          // elevator back-merge hash

  // ---- the scheduler's, while it holds the request ----
  RbNode rb_node;              // a scheduler's sort tree (blkmq/elevator/rbtree.h)
  uint64_t fifo_time = 0;      // scheduler FIFO deadline
  void* elv_priv[3] = {nullptr, nullptr, nullptr};  // scheduler private

  // ---- completion callback: set by whoever allocated a passthrough
  // request (Queue::alloc_request), or by the core's sync helpers and
  // flush machinery. Returns true to free the request, false if the
  // callee kept it ----
  bool (*end_io)(Request* rq, BlkStatus st) = nullptr;
  void* end_io_data = nullptr;
  // ---- the flush machinery's (core): PREFLUSH/DATA/POSTFLUSH steps done,
  // and the end_io it replaced ----
  uint8_t flush_seq = 0;
  // ---- the rq-qos chain's (src/qos/rq_qos.h): rq_qos_seen says the bio
  // that made the request passed the chain's filter, so its issue,
  // requeue and done hooks run (the core's); wbt_flags is wbt's, as the
  // kernel's rq->wbt_flags ----
  uint8_t rq_qos_seen = 0;
  uint8_t wbt_flags = 0;
  bool (*flush_saved_end_io)(Request* rq, BlkStatus st) = nullptr;

  uint64_t end_sector() const { return sector + (data_len >> kSectorShift); }
  bool is_write() const { return op_is_write(op); }
  // Driver payload of TagSetConfig::cmd_size bytes, 16-byte aligned.
  void* pdu() { return reinterpret_cast<char*>(this) + sizeof(Request); }
  template <typename T>
  T* pdu_as() { return static_cast<T*>(pdu()); }
};
static_assert(sizeof(Request) % 64 == 0);

// The request that owns a driver payload (inverse of pdu()).
inline Request* rq_from_pdu(void* pdu) {
  return reinterpret_cast<Request*>(static_cast<char*>(pdu) - sizeof(Request));
}

// Calls fn(void* base, size_t len, uint64_t byte_offset_in_request) for every
// data segment of the request, in order, across its bio chain.
template <typename Fn>
void rq_for_each_segment(const Request* rq, Fn&& fn) {
  uint64_t off = 0;
  for (const Bio* b = rq->bio; b; b = b->bi_next) {
    uint32_t skip = b->done_bytes;
    for (uint16_t i = 0; i < b->nr_vecs; i++) {
      size_t len = b->vec[i].iov_len;
      char* base = static_cast<char*>(b->vec[i].iov_base);
      if (skip >= len) { skip -= static_cast<uint32_t>(len); continue; }
      base += skip;
      len -= skip;
      skip = 0;
      fn(static_cast<void*>(base), len, off);
      off += len;
    }
  }
}

// A singly linked list of requests with a tail pointer (rq_list analogue),
// used for plugs and queue_rqs batches.
struct RqList {
  Request* head = nullptr;
  Request* tail = nullptr;
  unsigned count = 0;

  bool empty() const { return head == nullptr; }
  void push_back(Request* rq) {
    rq->rq_next = nullptr;
    if (tail) tail->rq_next = rq; else head = rq;
    tail = rq;
    count++;
  }
  void push_front(Request* rq) {
    rq->rq_next = head;
    head = rq;
    if (!tail) tail = rq;
    count++;
  }
  Request* pop_front() {
    Request* rq = head;
    if (!rq) return nullptr;
    head = rq->rq_next;
    if (!head) tail = nullptr;
    rq->rq_next = nullptr;
    count--;
    return rq;
  }
  void clear() { head = tail = nullptr; count = 0; }
};

// The request whose `queuelist` is n: for walking a ListNode list of
// requests (dispatch, scheduler, requeue lists). Any context; free.
inline Request* rq_of(ListNode* n) { return list_entry<Request, &Request::queuelist>(n); }

}  // namespace blkmq

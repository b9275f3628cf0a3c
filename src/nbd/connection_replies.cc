// The connection's replies: the writer thread and the sending token, the
// reply formats (simple, structured, OFFSET_HOLE for all-zero reads), and
// the BLOCK_STATUS chunk built on the reader.
#include <algorithm>
#include <cstring>
#include <vector>

#include "nbd/connection_inflight.h"
#include "nbd/protocol.h"

namespace blkmq::nbd {

// The base:allocation chunk for [offset, offset+length), or "" with *error
// set (validate_request has already checked the range and the context).
// Descriptors stop at the request's end (clipped, not extended) and at
// kMaxBlockDescriptors; REQ_ONE asks for exactly one.
std::string Connection::block_status_reply(const Request& r, uint32_t* error) const {
  const size_t max = (r.flags & kCmdFlagReqOne) ? 1 : kMaxBlockDescriptors;
  if (!exp_->dev) {  // base_allocation offered without a device to ask: a setup bug
    *error = kErrIo;
    return {};
  }
  auto map = exp_->dev->allocation(r.offset, r.length, max);
  if (!map) {
    *error = map.status().code() == EINVAL ? kErrInval : kErrIo;
    return {};
  }
  if (map->empty()) {  // the contract promises one extent: never send an empty chunk
    *error = kErrIo;
    return {};
  }
  std::vector<BlockDescriptor> descs;
  descs.reserve(map->size());
  for (const Extent& e : *map) {
    uint32_t flags = 0;
    if (e.flags & kExtentHole) flags |= kStateHole;
    if (e.flags & kExtentZero) flags |= kStateZero;
    // The map never runs past the request, whose length is a u32.
    descs.push_back({static_cast<uint32_t>(e.length), flags});
  }
  return block_status_chunk(r.cookie, kBaseAllocationId, descs, true);
}

void Connection::writer() {
  std::unique_lock l(mu_);
  for (;;) {
    cv_.wait(l, [&] { return (!done_.empty() || writer_exit_) && !sending_; });
    if (done_.empty()) return;  // writer_exit_ and nothing left
    send_queued(l);
  }
}

// Replies smaller than this are gathered in out_ (a 4 KiB READ's data
// included); larger payloads go straight from their buffer, after what is
// gathered. Gathering stops at kOutFlushBytes, so a busy connection still
// sends as it goes.
constexpr size_t kOutDirectBytes = 16 << 10;
constexpr size_t kOutFlushBytes = 64 << 10;

bool Connection::send_out(const char* p, size_t n) {
  if (n >= kOutDirectBytes) return flush_out() && send_all(p, n);
  out_.append(p, n);
  return out_.size() < kOutFlushBytes || flush_out();
}

bool Connection::send_out(const std::string& s) { return send_out(s.data(), s.size()); }

bool Connection::flush_out() {
  if (out_.empty()) return !send_failed_.load(std::memory_order_relaxed);
  const bool ok = send_all(out_);
  out_.clear();
  return ok;
}

// Sends every queued reply, holding the one sending token so that replies
// never interleave on the socket. `l` holds mu_ on entry and on return.
// A reply stays counted in flight until it is on the wire, not merely in
// out_: the reader takes an idle connection as one with nothing left to
// send. What was gathered goes out before the token is given back.
void Connection::send_queued(std::unique_lock<std::mutex>& l) {
  sending_ = true;
  unsigned unsent = 0;  // replies taken from done_ and still counted
  uint64_t unsent_bytes = 0;
  for (;;) {
    if (unsent && out_.empty()) {
      inflight_ -= unsent;
      inflight_bytes_ -= unsent_bytes;
      unsent = 0;
      unsent_bytes = 0;
    }
    if (done_.empty()) {
      if (out_.empty()) break;
      l.unlock();
      flush_out();
      l.lock();
      continue;  // replies that came in meanwhile join the next gather
    }
    InFlight* io = done_.front();
    done_.pop_front();
    l.unlock();
    if (io->flush_next) {
      submit_flush(io);  // its completion queues the reply
      l.lock();
      continue;
    }
    send_reply(io);
    const uint64_t bytes = io->bytes;
    free_inflight(io);
    if (lim_.budget) lim_.budget->give(bytes);
    l.lock();
    unsent++;
    unsent_bytes += bytes;
  }
  sending_ = false;
  // The reader may wait for room or for idle; the writer, kept waiting by
  // the token, for its exit. Nobody else needs the wake-up: done_ is empty,
  // and waking the writer for nothing cost two context switches per batch
  // that the reader sent itself.
  if (reader_waits_ || writer_exit_) cv_.notify_all();
}

// The reader, after a batch: replies its own submissions completed inline
// (queued without waking the writer) are sent from here, which saves a
// wake-up and a context switch per batch on devices that complete in the
// submitter's context. If the writer is sending, it takes them: it looks
// at the queue again before it sleeps.
void Connection::reply_from_reader() {
  std::unique_lock l(mu_);
  if (done_.empty() || sending_) return;
  send_queued(l);
}

// Under structured replies READ and BLOCK_STATUS get chunks (an ERROR
// chunk when they fail); every other reply is simple, which the spec allows
// for the other commands. After a failed send, replies are dropped: the
// client is gone.
void Connection::send_reply(InFlight* io) {
  const Request& r = io->req;
  if (!io->reply.empty()) {
    send_out(io->reply);
    return;
  }
  if (xlim_.structured && (r.type == kCmdRead || r.type == kCmdBlockStatus)) {
    if (io->error != 0 || r.type != kCmdRead) {
      send_out(error_chunk(r.cookie, io->error ? io->error : uint32_t{kErrIo}, "request failed"));
    } else {
      send_read_reply(io);
    }
    return;
  }
  const bool data = r.type == kCmdRead && io->error == 0;
  if (send_out(simple_reply(r.cookie, io->error)) && data) send_out(io->buf.get(), r.length);
}

namespace {

bool all_zero(const char* p, size_t n) {
  // Zero head, then the buffer equal to itself shifted by the head's
  // length: all zero, by induction. memcmp is vectorised, a byte loop is not.
  constexpr size_t kHead = 16;
  if (n <= kHead) return std::all_of(p, p + n, [](char c) { return c == 0; });
  return std::all_of(p, p + kHead, [](char c) { return c == 0; }) && std::memcmp(p, p + kHead, n - kHead) == 0;
}

}  // namespace

// A successful structured READ: one OFFSET_DATA chunk, or one OFFSET_HOLE
// chunk when the data read is all zeroes and the export has an allocation
// map (where zero reads are common enough to pay for the scan). Deciding
// from the data the read returned, not from a map queried afterwards, keeps
// it exact under concurrent writes: the hole chunk says what the read saw.
void Connection::send_read_reply(InFlight* io) {
  const Request& r = io->req;
  if (exp_->dev && exp_->dev->reports_allocation() && all_zero(io->buf.get(), r.length)) {
    send_out(offset_hole_chunk(r.cookie, r.offset, r.length, true));
    return;
  }
  send_out(offset_data_chunk(r.cookie, r.offset, r.length, true)) && send_out(io->buf.get(), r.length);
}

}  // namespace blkmq::nbd

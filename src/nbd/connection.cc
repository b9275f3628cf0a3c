#include "nbd/connection.h"

#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <system_error>
#include <thread>
#include <utility>

#include "blkmq/plug.h"
#include "blkmq/status.h"
#include "nbd/connection_inflight.h"
#include "nbd/errors.h"
#include "nbd/unaligned.h"
#include "nbd/wire.h"

namespace blkmq::nbd {

namespace {

// Payload buffers (BufferPool) are page-aligned, as the kernel's bio pages
// are: an O_DIRECT driver (uring with direct=1) refuses buffers below the
// file's DIO memory alignment with EINVAL, and new char[] gives only 16
// bytes.

}  // namespace

namespace {

constexpr size_t kReadChunk = 256 * 1024;

// The connection whose reader is submitting on this thread: a completion
// that runs inside its submission (a device that completes inline) queues
// the reply without waking the writer, and the reader sends it.
thread_local const void* tl_reader = nullptr;

ReqOp op_of(uint16_t type) {
  switch (type) {
    case kCmdWrite: return ReqOp::write;
    case kCmdFlush: return ReqOp::flush;
    case kCmdTrim: return ReqOp::discard;
    case kCmdWriteZeroes: return ReqOp::write_zeroes;
    default: return ReqOp::read;
  }
}

}  // namespace

struct Connection::ReaderScope {
  explicit ReaderScope(const Connection* c) { tl_reader = c; }
  ~ReaderScope() { tl_reader = nullptr; }
  ReaderScope(const ReaderScope&) = delete;
  ReaderScope& operator=(const ReaderScope&) = delete;
};

Connection::Connection(int fd, const HandshakeConfig& cfg, const std::vector<Export>& exports, ConnLimits lim,
                       const TlsCredentials* tls)
    : fd_(fd),
      cfg_(cfg),
      exports_(exports),
      lim_(lim),
      tls_(tls),
      io_(fd, lim.send_timeout_ms),
      hs_(cfg),
      ioc_(acquire_io_context()) {}

Connection::~Connection() {
  if (fd_ >= 0) ::close(fd_);
  release_io_context(ioc_);  // run() returned only after every request completed
  WriteGate::release(gate_);
}

void Connection::release_inflight(void* p) { ::operator delete(p, std::align_val_t{alignof(InFlight)}); }

// The reader only (the Recycler's taker).
Connection::InFlight* Connection::new_inflight() {
  void* mem = inflights_.take();
  if (!mem) mem = ::operator new(sizeof(InFlight), std::align_val_t{alignof(InFlight)});
  auto* io = new (mem) InFlight;
  io->c = this;
  return io;
}

void Connection::free_inflight(InFlight* io) {
  io->~InFlight();  // its buffer goes back to pool_
  inflights_.give(io);
}

void Connection::stop() {
  {
    std::lock_guard g(mu_);  // orders the store with a reader about to wait for room
    if (stopping_.load()) return;
    stopping_.store(true);
  }
  cv_.notify_all();
  // Every wait on the socket, the reader's and the writer's, now ends by
  // the grace period; the reader is woken to answer what arrives ESHUTDOWN.
  io_.stop_after(Transport::now_ns() + int64_t{lim_.shutdown_grace_ms} * 1000000);
}

bool Connection::send_all(const char* p, size_t n) {
  while (n > 0 && !send_failed_.load(std::memory_order_relaxed)) {
    const ssize_t k = io_.send(p, n);
    if (k <= 0) {
      send_failed_.store(true);
      return false;
    }
    p += k;
    n -= static_cast<size_t>(k);
  }
  return !send_failed_.load(std::memory_order_relaxed);
}

bool Connection::send_all(const std::string& s) { return send_all(s.data(), s.size()); }

// Appends at least one byte (at most kReadChunk) to *pending; false on
// EOF, an error, a deadline (the handshake's, the idle timeout, the
// shutdown grace). Bytes land in rbuf_ and only those received are
// appended: growing the string first would zero-fill what is still
// missing on every partial read. Payloads never come through here: they
// are received straight into their request's buffer (receive_payload).
bool Connection::read_more(std::string* pending) {
  if (!rbuf_) rbuf_.reset(new char[kReadChunk]);
  set_read_deadline();
  const ssize_t k = io_.recv(rbuf_.get(), kReadChunk);
  if (k > 0) {
    pending->append(rbuf_.get(), static_cast<size_t>(k));
    return true;
  }
  if (k == 0) reason_ = stopping_.load() ? "server shutting down (the client left)" : "client closed the connection";
  else if (errno == ETIMEDOUT) reason_ = timeout_reason();
  else reason_ = std::string(io_.tls() ? "TLS receive failed: " : "receive failed: ") + io_.recv_error();
  return false;
}

// What a receive that ran out of time ran into.
std::string Connection::timeout_reason() const {
  if (stopping_.load()) return "server shutting down (grace period over)";
  if (exp_ == nullptr) return "handshake timed out";
  return "idle timeout";
}

// The reader's next wait: the handshake's deadline until GO; in
// transmission the idle timeout, counted only while nothing is in flight
// (a client waiting for a slow reply is not idle).
void Connection::set_read_deadline() {
  if (exp_ == nullptr) {
    io_.set_deadline(hs_deadline_ns_);
    return;
  }
  bool idle = false;
  if (lim_.idle_timeout_ms) {
    std::lock_guard g(mu_);
    idle = inflight_ == 0;
  }
  io_.set_deadline(idle ? Transport::now_ns() + int64_t{lim_.idle_timeout_ms} * 1000000 : 0);
}

// STARTTLS was ACKed: the TLS handshake on the socket, then haggling
// resumes inside TLS. A client that sent more after STARTTLS without
// waiting for the ACK broke the protocol (those bytes are neither option
// nor TLS record), and is dropped.
bool Connection::start_tls(const std::string& pending) {
  if (!pending.empty()) {
    reason_ = "bytes after STARTTLS before its ACK";
    return false;
  }
  if (tls_ == nullptr) {
    reason_ = "STARTTLS without TLS credentials";
    return false;
  }
  if (Status st = io_.start_tls(*tls_, lim_.tls_handshake_timeout_ms); !st) {
    reason_ = st.message();
    return false;
  }
  hs_.tls_started();
  return !stopping_.load();
}

bool Connection::handshake() {
  // One deadline for the whole handshake, sends included: a client that
  // sends options and never reads the replies is bounded too.
  if (lim_.handshake_timeout_ms) hs_deadline_ns_ = Transport::now_ns() + int64_t{lim_.handshake_timeout_ms} * 1000000;
  io_.set_deadline(hs_deadline_ns_);
  if (!send_all(Handshake::greeting())) {
    reason_ = "handshake: the client does not read (greeting not sent)";
    return false;
  }
  std::string pending, out;
  for (;;) {
    const Handshake::State st = hs_.state();
    if (st == Handshake::State::start_tls) {
      if (!start_tls(pending)) return false;
      continue;
    }
    if (st != Handshake::State::client_flags && st != Handshake::State::options) break;
    if (!read_more(&pending)) return false;
    out.clear();
    pending.erase(0, hs_.consume(pending, &out));
    // STARTTLS's ACK goes out in plaintext.
    if (!out.empty() && !send_all(out)) {
      if (hs_.state() == Handshake::State::closed) reason_ = hs_.close_reason();  // ABORT's ACK to a client gone
      else if (hs_deadline_ns_ && Transport::now_ns() >= hs_deadline_ns_) reason_ = "handshake timed out (the client does not read)";
      else reason_ = "handshake: send failed";
      return false;
    }
  }
  if (hs_.state() != Handshake::State::transmission) {
    reason_ = hs_.close_reason();
    return false;
  }
  exp_ = &exports_[static_cast<size_t>(hs_.selected() - cfg_.exports.data())];
  ioc_->weight = exp_->weight;
  // Before the first bio, on the thread that submits with ioc_, as the
  // contract asks. It fails only for a removed group, which an export's
  // group never is (Export::group); the connection then stays in the root.
  if (exp_->group) (void)io_context_set_group(ioc_, exp_->group);
  xlim_.size = exp_->def.size;
  // A client that did not agree to the advertised minimum may send any
  // byte range; what is not on whole device blocks is served by RMW.
  xlim_.min_block = hs_.block_size_agreed() ? exp_->def.min_block : 1;
  block_ = exp_->q->limits().logical_block_size;
  gate_ = WriteGate::acquire(exp_->q);
  xlim_.max_payload = exp_->def.max_block;
  xlim_.read_only = exp_->def.tx_flags & kTxReadOnly;
  xlim_.structured = hs_.structured();
  xlim_.meta_context = hs_.base_allocation();
  xlim_.fast_zero = exp_->def.tx_flags & kTxSendFastZero;
  xlim_.trim = exp_->def.tx_flags & kTxSendTrim;
  xlim_.write_zeroes = exp_->def.tx_flags & kTxSendWriteZeroes;
  io_.set_deadline(0);  // transmission's waits: set_read_deadline
  // Bytes after GO's ACK are already requests; keep them for transmission.
  leftover_ = std::move(pending);
  return true;
}

void Connection::run() {
  std::thread w;
  try {
    w = std::thread([this] { writer(); });
    // Named here, not in the thread: the name is there before the
    // handshake, for whoever looks at the connection's threads.
    pthread_setname_np(w.native_handle(), "nbd-writer");
  } catch (const std::system_error& e) {  // out of threads: this client is refused, the others go on
    reason_ = std::string("cannot start the connection's writer thread: ") + e.what();
    in_handshake_.store(false);
    ::shutdown(fd_, SHUT_RDWR);
    return;
  }
  const bool in_transmission = handshake();
  in_handshake_.store(false);
  if (in_transmission) transmission();
  wait_idle();
  {
    std::lock_guard g(mu_);
    writer_exit_ = true;
  }
  cv_.notify_all();
  w.join();
  // close_notify under TLS, unless a send already failed (the client is not
  // reading: bye would only wait out the send timeout again).
  if (!send_failed_.load()) io_.bye();
  // The client waits for the close after DISC: end the stream now. The
  // descriptor itself is closed by the destructor, so a late stop() never
  // touches a reused descriptor number.
  ::shutdown(fd_, SHUT_RDWR);
}

// Reads requests until DISC, EOF, an error or the end of the shutdown
// grace. Every whole request in the buffer is submitted under one plug, so
// a batch the client sent together reaches the queue together; the plug is
// flushed before the reader waits for room or for more bytes, or its
// requests could never complete. A WRITE whose payload has not all arrived
// is taken with what there is, and the rest is received straight into its
// buffer, outside the plug.
void Connection::transmission() {
  std::string pending = std::move(leftover_);
  size_t pos = 0;
  for (;;) {
    xlim_.shutting_down = stopping_.load();
    {
      ReaderScope in_reader(this);
      Plug plug(32);
      pos = take_requests(pending, pos);
    }
    reply_from_reader();
    if (!reason_.empty()) return;
    if (need_room_) {
      need_room_ = false;
      wait_for_room(room_wanted_);
      continue;
    }
    if (need_gate_) {
      need_gate_ = false;
      gate_->wait_open();
      continue;
    }
    if (need_budget_) {
      // Wait until the bytes fit, give them back and take the request
      // again: take_requests takes them with it.
      need_budget_ = false;
      if (lim_.budget->take(room_wanted_, [this] { return stopping_.load(); })) lim_.budget->give(room_wanted_);
      continue;
    }
    pending.erase(0, pos);
    pos = 0;
    if (unaligned_) {
      InFlight* io = std::exchange(unaligned_, nullptr);
      run_unaligned(io);
      continue;
    }
    if (partial_) {
      if (!receive_payload()) return;
      continue;
    }
    if (skip_left_) {
      if (!skip_payload(&pending)) return;
      continue;
    }
    if (!read_more(&pending)) return;
  }
}

// The rest of partial_'s payload, received into its buffer, then submitted.
bool Connection::receive_payload() {
  InFlight* io = partial_;
  const uint32_t len = io->req.length;
  while (io->have < len) {
    set_read_deadline();
    const ssize_t k = io_.recv(io->buf.get() + io->have, len - io->have);
    if (k <= 0) {
      reason_ = k == 0 ? "client closed the connection inside a WRITE payload"
                       : (errno == ETIMEDOUT ? timeout_reason() : "receive failed inside a WRITE payload");
      drop_partial();
      return false;
    }
    io->have += static_cast<uint32_t>(k);
  }
  partial_ = nullptr;
  if (io->unaligned) {
    run_unaligned(io);
    return true;
  }
  enter_gate(io);
  ReaderScope in_reader(this);
  submit(io);
  return true;
}

// Outside the plug: waits while an RMW holds the queue's writes.
void Connection::enter_gate(InFlight* io) {
  while (!gate_->try_enter()) gate_->wait_open();
  io->gated = true;
}

// A byte-granular request, synchronously on the reader (nothing plugged):
// its reply is queued as any other. Writes run with the queue's writes
// drained and held back (WriteGate), so the read-modify-write of a shared
// block cannot lose another write to it.
void Connection::run_unaligned(InFlight* io) {
  const Request& r = io->req;
  const UnalignedOp op{exp_->q, ioc_, block_, r.offset, r.length, (r.flags & kCmdFlagFua) != 0};
  BlkStatus st;
  if (r.type == kCmdRead) {
    st = unaligned_read(op, io->buf.get());
  } else {
    gate_->begin_rmw();
    st = r.type == kCmdWrite ? unaligned_write(op, io->buf.get())
         : r.type == kCmdTrim ? unaligned_trim(op)
                              : unaligned_zero(op);
    gate_->end_rmw();
  }
  io->error = nbd_error(st);
  complete(io);
}

// A WRITE whose payload never came: not submitted, so not answered; it
// stops counting as in flight, or the connection could not drain.
void Connection::drop_partial() {
  {
    std::lock_guard g(mu_);
    inflight_--;
    inflight_bytes_ -= partial_->bytes;
  }
  if (lim_.budget) lim_.budget->give(partial_->bytes);
  free_inflight(partial_);
  partial_ = nullptr;
}

// Drops what is left of a refused WRITE's payload: first what the buffer
// holds, then from the socket, never more than the payload.
bool Connection::skip_payload(std::string* pending) {
  const size_t from_buf = static_cast<size_t>(std::min<uint64_t>(skip_left_, pending->size()));
  pending->erase(0, from_buf);
  skip_left_ -= from_buf;
  if (!rbuf_) rbuf_.reset(new char[kReadChunk]);
  while (skip_left_ > 0) {
    set_read_deadline();
    const ssize_t k = io_.recv(rbuf_.get(), static_cast<size_t>(std::min<uint64_t>(skip_left_, kReadChunk)));
    if (k <= 0) {
      reason_ = k == 0 ? "client closed the connection inside a WRITE payload" : "receive failed inside a WRITE payload";
      return false;
    }
    skip_left_ -= static_cast<uint64_t>(k);
  }
  return true;
}

// A WRITE that will be served: its buffer gets the payload bytes already in
// pending[at..]; when all are there it is submitted, else it waits in
// partial_ for receive_payload. A buffer that cannot be had is ENOMEM, and
// the payload is dropped.
void Connection::begin_write(const Request& r, const std::string& pending, size_t at) {
  const size_t avail = std::min<size_t>(pending.size() - at, r.length);
  size_t cap = 0;
  char* buf = pool_.get(r.length, &cap);
  if (buf == nullptr) {
    // take_requests let a whole aligned WRITE through the gate.
    if (avail == r.length && !is_unaligned(r.offset, r.length, block_)) gate_->exit();
    if (lim_.budget) lim_.budget->give(r.length);
    reply_now(r, kErrNoMem);
    skip_left_ = r.length - avail;
    return;
  }
  InFlight* io = new_inflight();
  io->req = r;
  io->buf = {buf, PooledBuf{&pool_, cap}};
  io->bytes = r.length;
  std::memcpy(buf, pending.data() + at, avail);
  io->have = static_cast<uint32_t>(avail);
  io->unaligned = is_unaligned(r.offset, r.length, block_);
  if (io->have == r.length) {
    if (io->unaligned) {
      count(io);
      unaligned_ = io;
      return;
    }
    io->gated = true;  // take_requests let it in
    submit(io);
    return;
  }
  // Counted now, so the room check of the next request sees it.
  count(io);
  partial_ = io;
}

void Connection::count(InFlight* io) {
  std::lock_guard g(mu_);
  inflight_++;
  inflight_bytes_ += io->bytes;
  io->counted = true;
}

// Takes whole requests from pending[pos..]: validates, submits or answers
// each. Returns the new position; sets reason_ when the connection must
// end, partial_ or skip_left_ when a WRITE's payload is still to come
// (its header and the payload bytes there are consumed).
size_t Connection::take_requests(const std::string& pending, size_t pos) {
  while (pending.size() - pos >= kRequestSize) {
    Request r;
    if (!parse_request(std::string_view(pending).substr(pos, kRequestSize), &r)) {
      reason_ = "bad request magic";
      return pos;
    }
    const uint64_t payload = request_payload(r);
    // The spec allows a hard disconnect for payloads over 32 MiB: the server
    // would otherwise have to read and drop up to 4 GiB.
    if (payload > kMaxPayload) {
      reason_ = "WRITE payload over 32 MiB";
      return pos;
    }
    if (r.type == kCmdDisc) {
      reason_ = "client sent DISC";
      return pos + kRequestSize;
    }
    uint32_t err = validate_request(r, xlim_);
    if (err == 0) err = refuse_slow_zero(r);
    const bool has_buf = err == 0 && (r.type == kCmdRead || r.type == kCmdWrite);
    if (!has_room(has_buf ? r.length : 0)) {
      need_room_ = true;  // flush the plug, then wait
      room_wanted_ = has_buf ? r.length : 0;
      return pos;
    }
    if (has_buf && lim_.budget && !lim_.budget->try_take(r.length)) {
      need_budget_ = true;  // flush the plug, then wait
      room_wanted_ = r.length;
      return pos;
    }
    const size_t at = pos + kRequestSize;
    const size_t in_buf = static_cast<size_t>(std::min<uint64_t>(payload, pending.size() - at));
    // A write submitted now passes the gate now (one that waits for its
    // payload passes it later, outside the plug); one that cannot leaves
    // the plug to be flushed first.
    const bool writes = err == 0 && (r.type == kCmdWrite || r.type == kCmdTrim || r.type == kCmdWriteZeroes);
    if (writes && in_buf == payload && !is_unaligned(r.offset, r.length, block_) && !gate_->try_enter()) {
      need_gate_ = true;
      return pos;
    }
    if (err != 0 || r.type == kCmdCache || r.type == kCmdBlockStatus) {
      answer_now(r, err);
      skip_left_ = payload - in_buf;
    } else if (r.type == kCmdWrite) {
      begin_write(r, pending, at);
    } else {
      start_request(r);
    }
    pos = at + in_buf;
    if (partial_ || skip_left_ || unaligned_) return pos;
  }
  return pos;
}

// A READ, FLUSH, TRIM or WRITE_ZEROES that will be served.
void Connection::start_request(const Request& r) {
  char* buf = nullptr;
  size_t cap = 0;
  if (r.type == kCmdRead && (buf = pool_.get(r.length, &cap)) == nullptr) {
    if (lim_.budget) lim_.budget->give(r.length);
    reply_now(r, kErrNoMem);
    return;
  }
  InFlight* io = new_inflight();
  io->req = r;
  if (buf) {
    io->buf = {buf, PooledBuf{&pool_, cap}};
    io->bytes = r.length;
  }
  io->flush_after = (r.flags & kCmdFlagFua) && (r.type == kCmdTrim || r.type == kCmdWriteZeroes);
  if (r.type != kCmdFlush && is_unaligned(r.offset, r.length, block_)) {
    io->unaligned = true;
    count(io);
    unaligned_ = io;
    return;
  }
  io->gated = r.type != kCmdRead && r.type != kCmdFlush;  // take_requests let it in
  submit(io);
}

bool Connection::has_room(uint64_t bytes) {
  std::lock_guard g(mu_);
  if (inflight_ == 0) return true;  // one request always fits, whatever its size
  return inflight_ < lim_.max_requests && inflight_bytes_ + bytes <= lim_.max_bytes;
}

void Connection::wait_for_room(uint64_t bytes) {
  std::unique_lock l(mu_);
  reader_waits_++;
  cv_.wait(l, [&] {
    return stopping_.load() || inflight_ == 0 ||
           (inflight_ < lim_.max_requests && inflight_bytes_ + bytes <= lim_.max_bytes);
  });
  reader_waits_--;
}

void Connection::wait_idle() {
  std::unique_lock l(mu_);
  reader_waits_++;
  cv_.wait(l, [&] { return inflight_ == 0; });
  reader_waits_--;
}

void Connection::submit(InFlight* io) {
  if (!io->counted) {
    std::lock_guard g(mu_);
    inflight_++;
    inflight_bytes_ += io->bytes;
    io->counted = true;
  }
  const Request& r = io->req;
  Bio& b = io->bio;
  b.op = op_of(r.type);
  // FUA is the device's on writes only; TRIM and WRITE_ZEROES get theirs
  // from a FLUSH after them (flush_after), FLUSH needs none.
  b.flags = (r.flags & kCmdFlagFua) && b.op == ReqOp::write ? uint32_t{kBioFua} : 0u;
  if (b.op == ReqOp::write) b.flags |= kBioSync;
  if (b.op == ReqOp::flush) b.flags |= kBioPreflush;
  b.sector = r.offset >> kSectorShift;
  b.size = b.op == ReqOp::flush ? 0 : r.length;
  if (io->buf) {
    io->iov = {io->buf.get(), r.length};
    b.vec = &io->iov;
    b.nr_vecs = 1;
  }
  b.ioc = ioc_;
  b.end_io = &Connection::end_io;
  b.private_data = io;
  exp_->q->submit_bio(&b);
}

// The FLUSH that makes a completed TRIM or WRITE_ZEROES with FUA durable;
// its completion answers the request. Called by whoever sends replies (not
// from end_io, which may be the driver's hardirq context, where waiting for
// a tag is not allowed).
void Connection::submit_flush(InFlight* io) {
  io->flush_next = false;
  io->flush_after = false;
  io->bio = Bio{};
  io->bio.op = ReqOp::flush;
  io->bio.flags = kBioPreflush;
  io->bio.ioc = ioc_;
  io->bio.end_io = &Connection::end_io;
  io->bio.private_data = io;
  exp_->q->submit_bio(&io->bio);
}

// A refused request (or CACHE): its reply is queued at once.
void Connection::reply_now(const Request& r, uint32_t error) {
  InFlight* io = new_inflight();
  io->req = r;
  io->error = error;
  {
    std::lock_guard g(mu_);
    inflight_++;
    io->counted = true;
  }
  complete(io);
}

// FAST_ZERO asks for a zeroing that is cheap or none at all: when the
// device could only zero by writing, refuse before touching any data, so
// the client writes the zeroes itself only where it needs them. NO_HOLE
// needs nothing: blkmq's write_zeroes never deallocates (the uring driver
// uses ZERO_RANGE, not PUNCH_HOLE), which is what NO_HOLE asks.
uint32_t Connection::refuse_slow_zero(const Request& r) const {
  if (r.type != kCmdWriteZeroes || !(r.flags & kCmdFlagFastZero)) return 0;
  return exp_->dev && exp_->dev->write_zeroes_is_cheap() ? 0u : uint32_t{kErrNotSup};
}

// Requests answered on the reader thread: refusals, CACHE (advisory:
// nothing to do) and BLOCK_STATUS, whose query is a few lseeks or page
// lookups. They still go through the reply queue: only the holder of the
// sending token sends, so two replies never interleave on the socket, and
// the reply counts among the connection's requests in flight.
void Connection::answer_now(const Request& r, uint32_t error) {
  if (error != 0 || r.type != kCmdBlockStatus) {
    reply_now(r, error);
    return;
  }
  InFlight* io = new_inflight();
  io->req = r;
  io->reply = block_status_reply(r, &io->error);
  {
    std::lock_guard g(mu_);
    inflight_++;
    io->counted = true;
  }
  complete(io);
}

// Any context, the driver's hardirq one included: queue the reply, wake the writer.
void Connection::end_io(Bio* bio) {
  auto* io = static_cast<InFlight*>(bio->private_data);
  io->error = nbd_error(bio->status);
  io->flush_next = io->flush_after && io->error == 0;
  if (io->gated) {  // the op is done: a FLUSH after it changes no data
    io->gated = false;
    io->c->gate_->exit();
  }
  io->c->complete(io);
}

// The notify is under the lock: once the writer can see the reply, it may
// send it, the reader may find the connection idle and the connection may
// be destroyed, so nothing of `this` may be touched after the unlock.
// One wake-up per batch of replies: none while a sender holds the token
// (it looks at done_ again before it gives the token back), and none for a
// reply behind others (whoever queued the first woke the writer, or is the
// reader, which sends them all after its batch).
void Connection::complete(InFlight* io) {
  std::lock_guard g(mu_);
  const bool first = done_.empty();
  done_.push_back(io);
  if (tl_reader != this && first && !sending_) cv_.notify_all();
}

}  // namespace blkmq::nbd

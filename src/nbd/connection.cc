#include "nbd/connection.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <thread>

#include "blkmq/plug.h"
#include "blkmq/status.h"
#include "nbd/wire.h"

namespace blkmq::nbd {

namespace {

// Payload buffers are page-aligned, as the kernel's bio pages are: an
// O_DIRECT driver (uring with direct=1) refuses buffers below the file's
// DIO memory alignment with EINVAL, and new char[] gives only 16 bytes.
constexpr size_t kBufAlign = 4096;
struct FreeBuf {
  void operator()(char* p) const { std::free(p); }
};
char* alloc_buf(size_t n) {
  void* p = std::aligned_alloc(kBufAlign, (n + kBufAlign - 1) / kBufAlign * kBufAlign);
  if (p == nullptr) throw std::bad_alloc();  // as new char[] did
  return static_cast<char*>(p);
}

}  // namespace

// One request from header to reply. Owned by the connection from the
// header's arrival until its reply is sent.
struct Connection::InFlight {
  Connection* c = nullptr;
  Request req;
  Bio bio;
  iovec iov{};
  std::unique_ptr<char, FreeBuf> buf;  // READ: filled by the device; WRITE: the payload
  std::string reply;            // a reply built before queueing (BLOCK_STATUS); sent as is
  uint64_t bytes = 0;           // buffer bytes counted against ConnLimits
  uint32_t error = 0;           // NBD error of the reply
};

namespace {

constexpr size_t kReadChunk = 256 * 1024;

// The connection whose reader is submitting on this thread: a completion
// that runs inside its submission (a device that completes inline) queues
// the reply without waking the writer, and the reader sends it.
thread_local const void* tl_reader = nullptr;

// The NBD error for a block status (the spec's list; anything else is EIO).
uint32_t nbd_error(BlkStatus st) {
  switch (-blk_status_to_errno(st)) {
    case 0: return 0;
    case EPERM:
    case EROFS: return kErrPerm;
    case ENOSPC: return kErrNoSpc;
    case EINVAL: return kErrInval;
    case EOVERFLOW: return kErrOverflow;
    case EOPNOTSUPP: return kErrNotSup;
    case ESHUTDOWN: return kErrShutdown;
    default: return kErrIo;
  }
}

ReqOp op_of(uint16_t type) {
  switch (type) {
    case kCmdWrite: return ReqOp::write;
    case kCmdFlush: return ReqOp::flush;
    case kCmdTrim: return ReqOp::discard;
    case kCmdWriteZeroes: return ReqOp::write_zeroes;
    default: return ReqOp::read;
  }
}

// Bounds each receive by what is left until `deadline`; false once it passed.
bool recv_deadline(int fd, std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - std::chrono::steady_clock::now());
  if (left.count() <= 0) return false;
  const timeval tv{static_cast<time_t>(left.count() / 1000000), static_cast<suseconds_t>(left.count() % 1000000)};
  return ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0;
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
    : fd_(fd), cfg_(cfg), exports_(exports), lim_(lim), tls_(tls), io_(fd), hs_(cfg), ioc_(acquire_io_context()) {
  const timeval tv{static_cast<time_t>(lim.send_timeout_ms / 1000), static_cast<suseconds_t>(lim.send_timeout_ms % 1000) * 1000};
  ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

Connection::~Connection() {
  if (fd_ >= 0) ::close(fd_);
  release_io_context(ioc_);  // run() returned only after every request completed
}

void Connection::stop() {
  {
    std::lock_guard g(mu_);  // orders the store with a reader about to wait for room
    stopping_.store(true);
  }
  cv_.notify_all();
  // Wakes a reader blocked in recv, gnutls_record_recv or the TLS
  // handshake: each sees EOF.
  ::shutdown(fd_, SHUT_RD);
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

// Appends at least one byte (up to `want`, at least kReadChunk) to *pending;
// false on EOF, an error or stop(). Small reads land in rbuf_ and only the
// bytes received are appended: growing the string by a whole chunk first
// zero-filled 256 KiB per socket read, the largest cost of a 4 KiB WRITE.
// A large payload is received straight into the string, once.
bool Connection::read_more(std::string* pending, size_t want) {
  ssize_t k;
  if (want > kReadChunk) {
    const size_t old = pending->size();
    pending->resize(old + want);
    k = io_.recv(pending->data() + old, want);
    pending->resize(old + (k > 0 ? static_cast<size_t>(k) : 0));
  } else {
    if (!rbuf_) rbuf_.reset(new char[kReadChunk]);
    k = io_.recv(rbuf_.get(), kReadChunk);
    if (k > 0) pending->append(rbuf_.get(), static_cast<size_t>(k));
  }
  if (k == 0) reason_ = "client closed the connection";
  if (k < 0) reason_ = io_.tls() ? "TLS receive failed: " + io_.recv_error() : "receive failed";
  return k > 0 && !stopping_.load();
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
  if (!send_all(Handshake::greeting())) return false;
  std::string pending, out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(lim_.handshake_timeout_ms);
  for (;;) {
    const Handshake::State st = hs_.state();
    if (st == Handshake::State::start_tls) {
      if (!start_tls(pending)) return false;
      continue;
    }
    if (st != Handshake::State::client_flags && st != Handshake::State::options) break;
    if (lim_.handshake_timeout_ms && !recv_deadline(fd_, deadline)) {
      reason_ = "handshake timed out";
      return false;
    }
    io_.set_recv_timeout(lim_.handshake_timeout_ms != 0);
    if (!read_more(&pending, 0)) {
      // SO_RCVTIMEO's expiry reads as a failed receive with EAGAIN.
      if (reason_ != "client closed the connection" && (errno == EAGAIN || errno == EWOULDBLOCK))
        reason_ = "handshake timed out";
      return false;
    }
    out.clear();
    pending.erase(0, hs_.consume(pending, &out));
    if (!out.empty() && !send_all(out)) return false;  // STARTTLS's ACK goes out in plaintext
  }
  if (hs_.state() != Handshake::State::transmission) {
    reason_ = hs_.close_reason();
    return false;
  }
  exp_ = &exports_[static_cast<size_t>(hs_.selected() - cfg_.exports.data())];
  ioc_->weight = exp_->weight;
  xlim_.size = exp_->def.size;
  xlim_.min_block = exp_->def.min_block;
  xlim_.max_payload = exp_->def.max_block;
  xlim_.read_only = exp_->def.tx_flags & kTxReadOnly;
  xlim_.structured = hs_.structured();
  xlim_.meta_context = hs_.base_allocation();
  xlim_.fast_zero = exp_->def.tx_flags & kTxSendFastZero;
  xlim_.trim = exp_->def.tx_flags & kTxSendTrim;
  xlim_.write_zeroes = exp_->def.tx_flags & kTxSendWriteZeroes;
  // Transmission may idle as long as the client likes.
  const timeval forever{0, 0};
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &forever, sizeof forever);
  // Bytes after GO's ACK are already requests; keep them for transmission.
  leftover_ = std::move(pending);
  return true;
}

void Connection::run() {
  std::thread w([this] { writer(); });
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

// Reads requests until DISC, EOF or stop(). Every whole request in the
// buffer is submitted under one plug, so a batch the client sent together
// reaches the queue together; the plug is flushed before the reader waits
// for room or for more bytes, or its requests could never complete.
void Connection::transmission() {
  std::string pending = std::move(leftover_);
  size_t pos = 0;
  for (;;) {
    {
      ReaderScope in_reader(this);
      Plug plug(32);
      pos = take_requests(pending, pos);
    }
    reply_from_reader();
    if (!reason_.empty() || stopping_.load()) return;
    if (need_room_) {
      need_room_ = false;
      wait_for_room(room_wanted_);
      continue;
    }
    pending.erase(0, pos);
    pos = 0;
    // Ask for the whole of a WRITE whose header has arrived.
    size_t want = 0;
    Request r;
    if (pending.size() >= kRequestSize && parse_request(std::string_view(pending).substr(0, kRequestSize), &r)) {
      const uint64_t need = kRequestSize + request_payload(r);
      want = need > pending.size() ? static_cast<size_t>(need - pending.size()) : 0;
    }
    if (!read_more(&pending, want)) return;
  }
}

// Takes whole requests from pending[pos..]: validates, submits or answers
// each. Returns the new position; sets reason_ when the connection must end.
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
    if (pending.size() - pos < kRequestSize + payload) return pos;  // the payload is still arriving
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
    if (err != 0 || r.type == kCmdCache || r.type == kCmdBlockStatus) {
      answer_now(r, err);
    } else {
      auto* io = new InFlight;
      io->c = this;
      io->req = r;
      if (has_buf) {
        io->buf.reset(alloc_buf(r.length));
        io->bytes = r.length;
        if (r.type == kCmdWrite) std::memcpy(io->buf.get(), pending.data() + pos + kRequestSize, r.length);
      }
      submit(io);
    }
    pos += kRequestSize + payload;
  }
  return pos;
}

bool Connection::has_room(uint64_t bytes) {
  std::lock_guard g(mu_);
  if (inflight_ == 0) return true;  // one request always fits, whatever its size
  return inflight_ < lim_.max_requests && inflight_bytes_ + bytes <= lim_.max_bytes;
}

void Connection::wait_for_room(uint64_t bytes) {
  std::unique_lock l(mu_);
  cv_.wait(l, [&] {
    return stopping_.load() || inflight_ == 0 ||
           (inflight_ < lim_.max_requests && inflight_bytes_ + bytes <= lim_.max_bytes);
  });
}

void Connection::wait_idle() {
  std::unique_lock l(mu_);
  cv_.wait(l, [&] { return inflight_ == 0; });
}

void Connection::submit(InFlight* io) {
  {
    std::lock_guard g(mu_);
    inflight_++;
    inflight_bytes_ += io->bytes;
  }
  const Request& r = io->req;
  Bio& b = io->bio;
  b.op = op_of(r.type);
  b.flags = (r.flags & kCmdFlagFua) && b.op != ReqOp::read ? uint32_t{kBioFua} : 0u;
  if (b.op == ReqOp::write) b.flags |= kBioSync;
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

// A refused request (or CACHE): its reply is queued at once.
void Connection::reply_now(const Request& r, uint32_t error) {
  auto* io = new InFlight;
  io->c = this;
  io->req = r;
  io->error = error;
  {
    std::lock_guard g(mu_);
    inflight_++;
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
  auto* io = new InFlight;
  io->c = this;
  io->req = r;
  io->reply = block_status_reply(r, &io->error);
  {
    std::lock_guard g(mu_);
    inflight_++;
  }
  complete(io);
}

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

// Any context, the driver's hardirq one included: queue the reply, wake the writer.
void Connection::end_io(Bio* bio) {
  auto* io = static_cast<InFlight*>(bio->private_data);
  io->error = nbd_error(bio->status);
  io->c->complete(io);
}

// The notify is under the lock: once the writer can see the reply, it may
// send it, the reader may find the connection idle and the connection may
// be destroyed, so nothing of `this` may be touched after the unlock.
void Connection::complete(InFlight* io) {
  std::lock_guard g(mu_);
  done_.push_back(io);
  if (tl_reader != this) cv_.notify_all();  // the reader sends its own after the batch
}

void Connection::writer() {
  std::unique_lock l(mu_);
  for (;;) {
    cv_.wait(l, [&] { return (!done_.empty() || writer_exit_) && !sending_; });
    if (done_.empty()) return;  // writer_exit_ and nothing left
    send_queued(l);
  }
}

// Sends every queued reply, holding the one sending token so that replies
// never interleave on the socket. `l` holds mu_ on entry and on return.
void Connection::send_queued(std::unique_lock<std::mutex>& l) {
  sending_ = true;
  while (!done_.empty()) {
    InFlight* io = done_.front();
    done_.pop_front();
    l.unlock();
    send_reply(io);
    const uint64_t bytes = io->bytes;
    delete io;
    l.lock();
    inflight_--;
    inflight_bytes_ -= bytes;
  }
  sending_ = false;
  cv_.notify_all();  // the reader may wait for room or for idle
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
    send_all(io->reply);
    return;
  }
  if (xlim_.structured && (r.type == kCmdRead || r.type == kCmdBlockStatus)) {
    if (io->error != 0 || r.type != kCmdRead) {
      send_all(error_chunk(r.cookie, io->error ? io->error : uint32_t{kErrIo}, "request failed"));
    } else {
      send_read_reply(io);
    }
    return;
  }
  const bool data = r.type == kCmdRead && io->error == 0;
  if (send_all(simple_reply(r.cookie, io->error)) && data) send_all(io->buf.get(), r.length);
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
    send_all(offset_hole_chunk(r.cookie, r.offset, r.length, true));
    return;
  }
  send_all(offset_data_chunk(r.cookie, r.offset, r.length, true)) && send_all(io->buf.get(), r.length);
}

}  // namespace blkmq::nbd

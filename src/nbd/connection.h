// One NBD client connection: the handshake on the socket, then the
// transmission loop. Each request becomes a bio on the export's queue, so
// the queue's scheduler and merging order every client's I/O; replies go
// out as requests complete, in completion order.
//
// Threads: run() is the reader (handshake, request headers, WRITE payloads,
// submission under one plug per socket read); a writer thread sends the
// replies that end_io hands it, since end_io may run in a driver's hardirq
// context and must not block on a socket. Replies completed inside the
// reader's own submission (a device that completes inline) are sent by the
// reader after its batch, sparing the writer's wake-up; one sending token
// keeps the two from sending at once.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "blkmq/iogroup.h"
#include "blkmq/ioctx.h"
#include "blkmq/device.h"
#include "blkmq/queue.h"
#include "nbd/buffer_pool.h"
#include "nbd/byte_budget.h"
#include "nbd/handshake.h"
#include "nbd/recycler.h"
#include "nbd/tls.h"
#include "nbd/write_gate.h"

namespace blkmq::nbd {

// An export: what the handshake advertises and the queue that serves it.
// Several exports may share one queue (names that give their clients
// different weights on one device). `dev`, when given, is q's device: it
// answers BLOCK_STATUS (def must then have base_allocation, and the device
// reports_allocation()) and says whether FAST_ZERO can be honoured; without
// it FAST_ZERO always gets ENOTSUP and reads never become holes.
struct Export {
  ExportDef def;
  Queue* q = nullptr;
  Device* dev = nullptr;
  // The bfq weight (1..1000) of each connection to this export: every
  // connection is an I/O context of its own, as a process is in the kernel.
  uint16_t weight = 100;
  // The I/O group (the kernel's cgroup) every connection to this export
  // joins once its handshake selected the export, so one tenant's
  // connections share the group's io.stat and limits. nullptr: the root.
  // The group must outlive the server (blkmq nbd never removes it).
  IoGroup* group = nullptr;
};

// The most descriptors one BLOCK_STATUS reply carries (16 KiB of them): the
// client asks again from where the reply stopped, and the reader thread
// that builds the reply is not held for long by a fragmented file.
inline constexpr size_t kMaxBlockDescriptors = 2048;

// Bounds on one connection's requests in flight: the reader stops reading
// while either is reached, so a client that floods requests or never reads
// its replies cannot make the server's memory grow.
struct ConnLimits {
  unsigned max_requests = 128;
  uint64_t max_bytes = 64ull << 20;  // buffers of requests in flight (one request may exceed it alone)
  // A reply the client does not take within this long ends the connection
  // (its other replies are dropped), so a client that stops reading cannot
  // hold a server thread, or a server stop, forever. Each wait for the
  // socket to take more bytes counts from zero: a slow but steady reader is
  // served.
  unsigned send_timeout_ms = 30000;
  // Bounds the TLS handshake after STARTTLS, so a client that stalls in it
  // cannot hold the connection's thread.
  unsigned tls_handshake_timeout_ms = 10000;
  // The whole handshake, greeting to GO, bytes in and out, must finish
  // within this long (0 = no limit), so clients that connect and stall, or
  // that send options and never read the replies, cannot hold connection
  // slots and lock the others out.
  unsigned handshake_timeout_ms = 10000;
  // Transmission: a connection with no request in flight that receives
  // nothing for this long is ended (0 = never, the default, as nbdkit's).
  unsigned idle_timeout_ms = 0;
  // After stop(): requests that still arrive are answered ESHUTDOWN (the
  // spec's soft disconnect) for up to this long, or until the client
  // disconnects; then the connection ends, and so does any send still
  // waiting for a client that does not read.
  unsigned shutdown_grace_ms = 1000;
  // The server-wide bound on payload bytes in flight, shared by every
  // connection (Server sets it; null: only max_bytes applies).
  ByteBudget* budget = nullptr;
};

class Connection {
 public:
  // Takes ownership of `fd` (closed by run()). `cfg` lists the same exports
  // as `exports`, in the same order; both must outlive the connection, and
  // so must `tls`: the credentials STARTTLS uses (null: the handshake has
  // TLS off, or a STARTTLS it ACKs ends the connection).
  Connection(int fd, const HandshakeConfig& cfg, const std::vector<Export>& exports, ConnLimits lim = {},
             const TlsCredentials* tls = nullptr);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Serves the connection until the client disconnects (DISC, EOF, an error,
  // a protocol violation) or stop() is called; every submitted request has
  // completed (and its reply was sent, if the socket still takes it) when it
  // returns. Blocking; call once, on the connection's own thread.
  void run();
  // Any thread: the server is going away. New requests are answered
  // ESHUTDOWN for ConnLimits::shutdown_grace_ms (or until the client
  // leaves); requests in flight finish and are answered while the client
  // reads; no wait of the connection outlasts the grace period. Safe
  // before, during or after run(), and more than once.
  void stop();

  // Any thread, while the Connection exists: ends the connection at once,
  // both ways (shutdown SHUT_RDWR), so a reader blocked in recv and a writer
  // blocked on a client that does not read both return; replies not yet sent
  // are dropped. What the server uses past its stop grace period, and to
  // evict a stalled handshake.
  void abort() { ::shutdown(fd_, SHUT_RDWR); }
  // Any thread: true until the handshake ends (in transmission, or failed).
  bool in_handshake() const { return in_handshake_.load(); }

  // What ended the connection (for the server's log), valid after run().
  const std::string& end_reason() const { return reason_; }

 private:
  struct InFlight;

  // Request state, recycled through inflights_: new_inflight on the reader
  // only, free_inflight from any thread (the sender of its reply).
  InFlight* new_inflight();
  void free_inflight(InFlight* io);
  static void release_inflight(void* p);
  bool handshake();
  bool start_tls(const std::string& pending);
  void transmission();
  size_t take_requests(const std::string& pending, size_t pos);
  void submit(InFlight* io);
  void submit_flush(InFlight* io);
  void start_request(const Request& r);
  std::string timeout_reason() const;
  void reply_now(const Request& r, uint32_t error);
  uint32_t refuse_slow_zero(const Request& r) const;
  void answer_now(const Request& r, uint32_t error);
  std::string block_status_reply(const Request& r, uint32_t* error) const;
  static void end_io(Bio* bio);
  void complete(InFlight* io);
  void writer();
  void send_queued(std::unique_lock<std::mutex>& l);
  void reply_from_reader();
  // Marks this thread as the connection's reader while it submits a batch.
  struct ReaderScope;
  void send_reply(InFlight* io);
  void send_read_reply(InFlight* io);
  bool send_all(const std::string& s);
  bool send_all(const char* p, size_t n);
  bool send_out(const char* p, size_t n);
  bool send_out(const std::string& s);
  bool flush_out();
  bool read_more(std::string* pending);
  bool receive_payload();
  void drop_partial();
  void run_unaligned(InFlight* io);
  void enter_gate(InFlight* io);
  void count(InFlight* io);
  bool skip_payload(std::string* pending);
  void begin_write(const Request& r, const std::string& pending, size_t at);
  void set_read_deadline();
  bool has_room(uint64_t bytes);
  void wait_for_room(uint64_t bytes);
  void wait_idle();

  const int fd_;
  const HandshakeConfig& cfg_;
  const std::vector<Export>& exports_;
  const ConnLimits lim_;
  const TlsCredentials* const tls_;
  BufferPool pool_;                  // payload buffers; outlives every InFlight (they end before run() returns)
  Recycler inflights_{&Connection::release_inflight};  // InFlights ended, for the reader to reuse
  Transport io_;                     // the socket, or the TLS session on it after STARTTLS
  Handshake hs_;
  const Export* exp_ = nullptr;
  IoContext* const ioc_;             // this connection's I/O context (bfq's queue and weight)
  ExportLimits xlim_;
  std::string reason_;
  std::unique_ptr<char[]> rbuf_;     // the reader's receive buffer (kReadChunk bytes)
  std::string leftover_;             // bytes read past the handshake: the first requests
  InFlight* partial_ = nullptr;      // reader: a WRITE whose payload is still arriving (straight into its buffer)
  InFlight* unaligned_ = nullptr;    // reader: a byte-granular request, served outside the plug (unaligned.h)
  WriteGate* gate_ = nullptr;        // orders RMWs against every write to the queue
  uint32_t block_ = 512;             // the device's logical block size: what is aligned
  bool need_gate_ = false;           // reader: a write waits for an RMW to end
  bool need_budget_ = false;         // reader: a request waits for the server-wide budget
  uint64_t skip_left_ = 0;           // reader: payload bytes of a refused WRITE still to drop
  int64_t hs_deadline_ns_ = 0;       // the handshake's end (steady ns; 0 = none)
  uint64_t room_wanted_ = 0;         // reader: the request that did not fit waits for this many bytes
  bool need_room_ = false;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> send_failed_{false};
  std::atomic<bool> in_handshake_{true};

  std::mutex mu_;
  std::condition_variable cv_;       // the writer: replies to send; the reader: room or idle
  std::deque<InFlight*> done_;       // completed, reply not sent yet
  unsigned inflight_ = 0;            // submitted or queued for a reply
  uint64_t inflight_bytes_ = 0;
  bool writer_exit_ = false;
  bool sending_ = false;             // the reader or the writer is sending replies
  unsigned reader_waits_ = 0;        // the reader waits on cv_ for room or for idle
  // The sending token's holder: small replies gathered for one send (one
  // TLS record) per pass over done_, instead of one or two per reply.
  std::string out_;
};

}  // namespace blkmq::nbd

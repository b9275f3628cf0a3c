// The NBD listener: a Unix socket or a TCP port (loopback unless told
// otherwise), one Connection and thread per client, a connection limit, and
// a clean stop that lets in-flight requests finish.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "blkmq/status.h"
#include "nbd/byte_budget.h"
#include "nbd/connection.h"
#include "nbd/tls.h"
#include "nbd/unix_listener.h"

namespace blkmq::nbd {

struct ServerConfig {
  std::string socket_path;          // non-empty: listen on this Unix socket (a stale socket there is
                                    // replaced; a live one or any other file is refused)
  int port = -1;                    // >= 0 without socket_path: TCP (0 picks a free port)
  std::string bind = "127.0.0.1";   // TCP address
  // Clients past their handshake (in transmission) served at once. While
  // this many are served, a new client is closed before the greeting, as
  // nbdkit's limit filter does (libnbd: "server disconnected unexpectedly").
  // Clients still in their handshake when it was reached may take it past
  // the limit by at most max_handshakes - 1: a client that has done its
  // handshake is never dropped for the limit.
  unsigned max_connections = 16;
  // Clients still in their handshake, apart from max_connections, so that
  // clients that connect and stall cannot lock out the served ones. When
  // all are taken, a new client evicts the one in its handshake the longest
  // if that one has been there handshake_evict_ms (a slow client is given
  // that long); otherwise the new one is closed before the greeting.
  unsigned max_handshakes = 16;
  unsigned handshake_evict_ms = 1000;
  // stop() lets in-flight requests finish and their replies go out this
  // long, then shuts every remaining connection down both ways (a client
  // that does not read its replies would otherwise hold serve() for up to
  // ConnLimits::send_timeout_ms).
  unsigned stop_grace_ms = 5000;
  // When accept() fails for want of descriptors or memory (EMFILE, ENFILE,
  // ENOBUFS, ENOMEM), the listener is left alone this long before the next
  // try, instead of spinning on a connection it cannot take; each episode
  // is logged once, and once more when it ends.
  unsigned accept_backoff_ms = 100;
  // Where the server's own messages go (one line each, no newline): null
  // writes them to stderr after "blkmq nbd: ". Called from serve()'s thread.
  std::function<void(const std::string&)> log;
  ConnLimits conn;                  // its `budget` is the server's own (below)
  // Payload bytes in flight over all connections (0: ByteBudget::default_max(),
  // an eighth of the machine's memory): no number of clients can make the
  // server's buffers outgrow it; a request that does not fit waits.
  uint64_t max_inflight_bytes = 0;
  TlsConfig tls;                    // its mode overrides the HandshakeConfig's
};

class Server {
 public:
  // Loads the TLS credentials (when cfg.tls.mode is not off), binds and
  // listens; the exports must outlive the server (`hs` is copied, with
  // cfg.tls.mode as its TLS mode). Control thread. Errors name the address,
  // or the credential file that is missing or bad.
  static Result<std::unique_ptr<Server>> listen(const ServerConfig& cfg, const HandshakeConfig& hs,
                                                const std::vector<Export>& exports);
  ~Server();

  // Accepts clients until stop(); then stops every connection, waits up to
  // stop_grace_ms for their in-flight requests, shuts down the ones still
  // left, and returns. TCP clients get keepalive probes (a peer gone
  // without a FIN is noticed in about two minutes). Blocking, one thread.
  void serve();
  // Any thread (not a signal handler): ends serve().
  void stop();

  // nbd+unix:///NAME?socket=PATH or nbd://ADDR:PORT/NAME, for clients
  // (nbds... with --tls=require; the client adds its own credential
  // parameters). NAME is `export_name` percent-encoded (RFC 3986
  // unreserved characters kept); "" is the default export. Any thread.
  std::string uri(const std::string& export_name = "") const;
  const std::string& socket_path() const { return cfg_.socket_path; }
  int port() const { return port_; }

 private:
  struct Conn {
    std::unique_ptr<Connection> c;
    std::thread t;
    std::atomic<bool> done{false};
    std::chrono::steady_clock::time_point accepted;
    bool evicted = false;  // aborted in its handshake to free the slot (under mu_)
  };
  enum class Admit { ok, evicted_oldest, full_served, full_handshakes };
  Server(const ServerConfig& cfg, const HandshakeConfig& hs, const std::vector<Export>& exports)
      : cfg_(cfg), hs_(hs), exports_(exports) {
    hs_.tls = cfg.tls.mode;
  }
  void reap(bool all);
  void start_connection(int fd);
  Admit admit();
  void defer_close(int fd);
  int close_refused(bool all);
  void refused(Admit why);
  void log(const std::string& msg) const;

  ServerConfig cfg_;
  HandshakeConfig hs_;
  const std::vector<Export>& exports_;
  std::unique_ptr<TlsCredentials> tls_;  // shared by every connection's session
  std::unique_ptr<ByteBudget> budget_;   // shared by every connection
  int listen_fd_ = -1;
  UnixListener unix_;  // with socket_path: listen_fd_'s socket file
  int wake_fd_ = -1;  // eventfd: stop() wakes the accept loop
  int port_ = -1;
  std::mutex mu_;
  std::condition_variable ended_;  // a connection's run() returned (done set under mu_)
  std::list<Conn> conns_;
  bool refusing_ = false;          // serve()'s thread: inside an episode of refusals (logged once)
  bool evicting_ = false;          // likewise for evictions of stalled handshakes
  // serve()'s thread: refused clients' sockets and when each is closed.
  std::deque<std::pair<int, std::chrono::steady_clock::time_point>> refused_fds_;
};

}  // namespace blkmq::nbd

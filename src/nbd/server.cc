#include "nbd/server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>

#include "nbd/unix_listener.h"

namespace blkmq::nbd {
namespace {

Status sys_error(const std::string& what) { return Status::error(errno, what + ": " + std::strerror(errno)); }

Result<int> listen_tcp(const std::string& addr, int port, int* bound) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, addr.c_str(), &a.sin_addr) != 1) return Status::invalid("bad --bind address " + addr);
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return sys_error("socket");
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 64) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    Status st = sys_error("cannot listen on " + addr + ":" + std::to_string(port));
    ::close(fd);
    return st;
  }
  *bound = ntohs(a.sin_port);
  return fd;
}

}  // namespace

Result<std::unique_ptr<Server>> Server::listen(const ServerConfig& cfg, const HandshakeConfig& hs,
                                               const std::vector<Export>& exports) {
  std::unique_ptr<Server> s(new Server(cfg, hs, exports));
  s->budget_ = std::make_unique<ByteBudget>(cfg.max_inflight_bytes ? cfg.max_inflight_bytes : ByteBudget::default_max());
  s->cfg_.conn.budget = s->budget_.get();
  if (cfg.tls.mode != TlsMode::off) {
    auto creds = TlsCredentials::load(cfg.tls);
    if (!creds) return creds.status();
    s->tls_ = std::move(*creds);
  }
  if (cfg.socket_path.empty()) {
    Result<int> fd = listen_tcp(cfg.bind, cfg.port < 0 ? 10809 : cfg.port, &s->port_);
    if (!fd) return fd.status();
    s->listen_fd_ = *fd;
  } else {
    Result<UnixListener> l = listen_unix_path(cfg.socket_path, 64);
    if (!l) return l.status();
    s->unix_ = *l;
    s->listen_fd_ = l->fd;
  }
  // A client gone between poll and accept must not block the loop in accept.
  ::fcntl(s->listen_fd_, F_SETFL, ::fcntl(s->listen_fd_, F_GETFL) | O_NONBLOCK);
  s->wake_fd_ = ::eventfd(0, EFD_CLOEXEC);
  if (s->wake_fd_ < 0) return sys_error("eventfd");
  return s;
}

Server::~Server() {
  reap(true);
  if (unix_.fd >= 0) close_unix_listener(&unix_, cfg_.socket_path);  // removes the socket if still ours
  else if (listen_fd_ >= 0) ::close(listen_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

namespace {
// The NBD URI spec's export name is a URI path: anything outside RFC 3986's
// unreserved set goes percent-encoded, so a name with '?' or '#' or a space
// still reaches its export.
std::string uri_path(const std::string& name) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const unsigned char c : name) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}
}  // namespace

std::string Server::uri(const std::string& export_name) const {
  // With TLS required, the URI a client must use is the nbds one.
  const std::string scheme = cfg_.tls.mode == TlsMode::require ? "nbds" : "nbd";
  const std::string path = uri_path(export_name);
  if (!cfg_.socket_path.empty()) return scheme + "+unix:///" + path + "?socket=" + cfg_.socket_path;
  return scheme + "://" + cfg_.bind + ":" + std::to_string(port_) + "/" + path;
}

void Server::stop() {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

// A client's DISC, its ABORT in the handshake (nbdinfo --list) and a
// close between requests (fio's nbd engine sends no DISC) are how clients
// leave: not worth a line in the log.
namespace {
bool ordinary_end(const std::string& why) {
  return why == "client sent DISC" || why == "client aborted" || why == "client closed the connection";
}
}  // namespace

// Joins finished connections; with `all`, stops every connection first,
// gives them stop_grace_ms to finish, and aborts the ones left.
void Server::reap(bool all) {
  std::unique_lock l(mu_);
  if (all) {
    for (Conn& c : conns_) c.c->stop();
    const auto all_done = [&] {
      for (const Conn& c : conns_)
        if (!c.done.load()) return false;
      return true;
    };
    if (!ended_.wait_for(l, std::chrono::milliseconds(cfg_.stop_grace_ms), all_done))
      for (Conn& c : conns_)
        if (!c.done.load()) c.c->abort();
  }
  // Joined outside mu_: a thread still running takes it to set done.
  std::list<Conn> ended;
  for (auto it = conns_.begin(); it != conns_.end();) {
    auto next = std::next(it);
    if (all || it->done.load()) ended.splice(ended.end(), conns_, it);
    it = next;
  }
  l.unlock();
  for (Conn& c : ended) {
    c.t.join();
    // Why each connection ended, for the operator: a failed TLS handshake,
    // a wrong PSK, a timeout or a protocol error is otherwise invisible.
    const std::string& why = c.c->end_reason();
    if (!ordinary_end(why)) log("connection ended: " + (why.empty() ? std::string("server stopped") : why));
  }
}

void Server::log(const std::string& msg) const {
  if (cfg_.log) cfg_.log(msg);
  else std::fprintf(stderr, "blkmq nbd: %s\n", msg.c_str());
}

// Out of descriptors (or of kernel memory), accept fails at once while the
// connection stays queued, so poll reports the listener readable forever:
// retrying at once would spin a core until a descriptor frees. Whether
// this failure is one of those.
static bool accept_exhausted(int err) { return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM; }

void Server::serve() {
  pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {listen_fd_, POLLIN, 0}};
  bool exhausted = false;  // inside an episode of accept_exhausted failures (logged once)
  bool pause = false;      // back off: poll only for stop() this once
  for (;;) {
    const int timeout = std::min(pause ? static_cast<int>(cfg_.accept_backoff_ms) : 1000, close_refused(false));
    fds[1].revents = 0;
    if (::poll(fds, pause ? 1 : 2, timeout) < 0 && errno != EINTR) break;
    if (fds[0].revents) break;
    pause = false;
    reap(false);
    if (!(fds[1].revents & POLLIN)) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      if (accept_exhausted(err) && !exhausted)
        log(std::string("accept: ") + std::strerror(err) + "; new connections wait, retried every " +
            std::to_string(cfg_.accept_backoff_ms) + " ms (raise ulimit -n?)");
      exhausted = pause = accept_exhausted(err);
      continue;
    }
    if (exhausted) log("accept: descriptors available again, accepting");
    exhausted = false;
    start_connection(fd);
  }
  close_refused(true);
  reap(true);
}

namespace {

// Kernel defaults (2 h idle, then 9 probes 75 s apart) would keep a slot
// of a peer that vanished without a FIN for over two hours; these notice it
// after 60 s idle and 6 probes 10 s apart.
constexpr int kKeepIdleS = 60, kKeepIntvlS = 10, kKeepCnt = 6;

void set_tcp_options(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &kKeepIdleS, sizeof kKeepIdleS);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &kKeepIntvlS, sizeof kKeepIntvlS);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &kKeepCnt, sizeof kKeepCnt);
}

}  // namespace

// Under mu_: whether a new client may start its handshake; evicts the
// oldest stalled handshake when that makes room.
Server::Admit Server::admit() {
  unsigned served = 0, handshaking = 0;
  Conn* oldest = nullptr;
  for (Conn& c : conns_) {
    if (c.done.load() || c.evicted) continue;
    if (!c.c->in_handshake()) {
      served++;
    } else {
      handshaking++;
      if (!oldest || c.accepted < oldest->accepted) oldest = &c;
    }
  }
  if (served >= cfg_.max_connections) return Admit::full_served;
  if (handshaking < cfg_.max_handshakes) return Admit::ok;
  if (!oldest || std::chrono::steady_clock::now() - oldest->accepted < std::chrono::milliseconds(cfg_.handshake_evict_ms))
    return Admit::full_handshakes;
  oldest->evicted = true;
  oldest->c->abort();
  return Admit::evicted_oldest;
}

// Logs the first refusal of an episode (which ends at the next admission),
// so a flood of clients does not flood the log.
void Server::refused(Admit why) {
  if (refusing_) return;
  refusing_ = true;
  if (why == Admit::full_served)
    log("refusing new clients: " + std::to_string(cfg_.max_connections) + " clients served (--connections)");
  else
    log("refusing new clients: " + std::to_string(cfg_.max_handshakes) + " clients in their handshake (--handshakes)");
}

// libnbd (1.14) polls a socket it is connecting for writing and takes a
// hang-up it sees there as a read event the connect state does not expect:
// a client closed before its first poll reports "external event 0 is
// invalid in state CONNECT.START" instead of "server disconnected
// unexpectedly". A refused client's socket is therefore closed
// kRefusedCloseDelayMs after its accept (by then the client waits for the
// greeting), at most kMaxRefusedOpen at once: past that a flood is closed
// at once rather than holding descriptors.
constexpr int kRefusedCloseDelayMs = 100;
constexpr size_t kMaxRefusedOpen = 64;

void Server::defer_close(int fd) {
  if (refused_fds_.size() >= kMaxRefusedOpen) {
    ::close(fd);
    return;
  }
  refused_fds_.push_back({fd, std::chrono::steady_clock::now() + std::chrono::milliseconds(kRefusedCloseDelayMs)});
}

// Closes the refused sockets whose delay is over (all of them with `all`);
// the milliseconds until the next one is due, for serve()'s poll.
int Server::close_refused(bool all) {
  const auto now = std::chrono::steady_clock::now();
  while (!refused_fds_.empty() && (all || refused_fds_.front().second <= now)) {
    ::close(refused_fds_.front().first);
    refused_fds_.pop_front();
  }
  if (refused_fds_.empty()) return 1000;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(refused_fds_.front().second - now);
  return static_cast<int>(left.count()) + 1;
}

void Server::start_connection(int fd) {
  if (cfg_.socket_path.empty()) set_tcp_options(fd);
  std::lock_guard g(mu_);
  const Admit a = admit();
  if (a == Admit::full_served || a == Admit::full_handshakes) {
    defer_close(fd);  // before the greeting, as nbdkit does over its limit
    refused(a);
    return;
  }
  if (a == Admit::evicted_oldest && !evicting_)
    log("dropping clients stalled in their handshake for new ones (" + std::to_string(cfg_.max_handshakes) +
        " handshakes at once, --handshakes)");
  evicting_ = a == Admit::evicted_oldest;
  refusing_ = false;
  Conn& c = conns_.emplace_back();
  c.accepted = std::chrono::steady_clock::now();
  try {
    c.c = std::make_unique<Connection>(fd, hs_, exports_, cfg_.conn, tls_.get());
    c.t = std::thread([this, &c] {
      c.c->run();
      {
        std::lock_guard g2(mu_);
        c.done.store(true);
      }
      ended_.notify_all();
    });
  } catch (const std::exception& e) {
    // Out of threads or memory: this client is refused (its socket closed
    // by the Connection, or here), the ones served go on.
    if (!c.c) ::close(fd);
    conns_.pop_back();
    log(std::string("refused a client: ") + e.what());
  }
}

}  // namespace blkmq::nbd

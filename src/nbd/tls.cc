#include "nbd/tls.h"

#include <gnutls/gnutls.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <algorithm>
#include <fstream>

namespace blkmq::nbd {
namespace {

// nbdkit's choice: GnuTLS's defaults, plus the PSK key exchanges, which
// NORMAL leaves out.
constexpr const char* kPriorityX509 = "NORMAL";
constexpr const char* kPriorityPsk = "NORMAL:+ECDHE-PSK:+DHE-PSK:+PSK";

Status tls_error(const std::string& what, int rc) {
  return Status::invalid(what + ": " + gnutls_strerror(rc));
}

bool readable(const std::string& path) { return ::access(path.c_str(), R_OK) == 0; }

// A psktool line: a non-empty name, ':', an even number (>0) of hex digits.
// The shortest PSK accepted: 16 bytes (128 bits). A PSK is the whole
// secret, with no slow key derivation in front of it, so a handshake a
// listener captured lets it test guesses offline at the speed of HMAC; a
// short key falls to brute force.
constexpr size_t kMinPskBytes = 16;

bool psk_line_ok(const std::string& line) {
  const size_t colon = line.find(':');
  if (colon == 0 || colon == std::string::npos) return false;
  const std::string key = line.substr(colon + 1);
  if (key.empty() || key.size() % 2 != 0) return false;
  for (char c : key)
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

}  // namespace

TlsCredentials::~TlsCredentials() {
  if (priority_) gnutls_priority_deinit(priority_);
  if (x509_) gnutls_certificate_free_credentials(x509_);
  if (psk_) gnutls_psk_free_server_credentials(psk_);
}

Result<std::unique_ptr<TlsCredentials>> TlsCredentials::load(const TlsConfig& cfg) {
  if (cfg.certificates.empty() == cfg.psk_file.empty())
    return Status::invalid("TLS needs either a certificates directory or a PSK file (exactly one)");
  if (cfg.verify_peer && cfg.certificates.empty())
    return Status::invalid("TLS peer verification needs X.509 certificates, not a PSK file");
  std::unique_ptr<TlsCredentials> c(new TlsCredentials);
  Status st = cfg.psk_file.empty() ? c->load_x509(cfg.certificates, cfg.verify_peer) : c->load_psk(cfg.psk_file);
  if (!st) return st;
  const char* prio = c->psk() ? kPriorityPsk : kPriorityX509;
  const char* err_pos = nullptr;
  if (const int rc = gnutls_priority_init(&c->priority_, prio, &err_pos); rc < 0)
    return tls_error(std::string("TLS priority string '") + prio + "'", rc);
  return c;
}

Status TlsCredentials::load_x509(const std::string& dir, bool verify_peer) {
  verify_peer_ = verify_peer;
  const std::string ca = dir + "/ca-cert.pem", crl = dir + "/ca-crl.pem";
  const std::string cert = dir + "/server-cert.pem", key = dir + "/server-key.pem";
  for (const std::string& f : {cert, key})
    if (!readable(f)) return Status::invalid("TLS: cannot read " + f + " (needed in --tls-certificates)");
  if (verify_peer && !readable(ca)) return Status::invalid("TLS: cannot read " + ca + " (needed by --tls-verify-peer)");
  if (const int rc = gnutls_certificate_allocate_credentials(&x509_); rc < 0) return tls_error("TLS credentials", rc);
  if (readable(ca))
    if (const int rc = gnutls_certificate_set_x509_trust_file(x509_, ca.c_str(), GNUTLS_X509_FMT_PEM); rc < 0)
      return tls_error("TLS: bad CA certificate " + ca, rc);
  if (readable(crl))
    if (const int rc = gnutls_certificate_set_x509_crl_file(x509_, crl.c_str(), GNUTLS_X509_FMT_PEM); rc < 0)
      return tls_error("TLS: bad CRL " + crl, rc);
  if (const int rc = gnutls_certificate_set_x509_key_file(x509_, cert.c_str(), key.c_str(), GNUTLS_X509_FMT_PEM); rc < 0)
    return tls_error("TLS: bad certificate or key " + cert + ", " + key, rc);
  // For a client that picks a DHE key exchange.
  gnutls_certificate_set_known_dh_params(x509_, GNUTLS_SEC_PARAM_MEDIUM);
  return Status::OK();
}

// GnuTLS reads the key file at each handshake and only checks that it
// exists here, so the file is checked now: a bad file is a start-up error,
// not a refused client much later.
Status TlsCredentials::load_psk(const std::string& file) {
  std::ifstream in(file);
  if (!in) return Status::invalid("TLS: cannot read the PSK file " + file);
  std::string line;
  int n = 0, keys = 0;
  while (std::getline(in, line)) {
    n++;
    if (line.empty()) continue;
    if (!psk_line_ok(line))
      return Status::invalid("TLS: " + file + " line " + std::to_string(n) + ": expected username:hexkey (psktool's format)");
    if (const size_t hex = line.size() - line.find(':') - 1; hex < 2 * kMinPskBytes)
      return Status::invalid("TLS: " + file + " line " + std::to_string(n) + ": key of " + std::to_string(hex / 2) +
                             " bytes is too short: at least " + std::to_string(kMinPskBytes) + " bytes (" +
                             std::to_string(2 * kMinPskBytes) + " hex digits) are needed, since a shorter key "
                             "can be found by brute force (psktool -s 32 makes one)");
    keys++;
  }
  if (keys == 0) return Status::invalid("TLS: the PSK file " + file + " holds no key");
  if (const int rc = gnutls_psk_allocate_server_credentials(&psk_); rc < 0) return tls_error("TLS credentials", rc);
  if (const int rc = gnutls_psk_set_server_credentials_file(psk_, file.c_str()); rc < 0)
    return tls_error("TLS: the PSK file " + file, rc);
  gnutls_psk_set_server_known_dh_params(psk_, GNUTLS_SEC_PARAM_MEDIUM);
  return Status::OK();
}

Transport::Transport(int fd, unsigned send_timeout_ms)
    : fd_(fd), send_timeout_ms_(send_timeout_ms), wake_fd_(::eventfd(0, EFD_CLOEXEC)) {}

Transport::~Transport() {
  if (session_) gnutls_deinit(session_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void Transport::stop_after(int64_t deadline_ns) {
  int64_t cur = 0;
  stop_ns_.compare_exchange_strong(cur, deadline_ns);
  const uint64_t one = 1;
  if (wake_fd_ >= 0) [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

namespace {

// The handshake's error, with what was wrong with a refused client
// certificate when that is the cause.
std::string handshake_error(gnutls_session_t s, int rc) {
  std::string msg = std::string("TLS handshake failed: ") + gnutls_strerror(rc);
  if (rc != GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR) return msg;
  gnutls_datum_t out{};
  const unsigned status = gnutls_session_get_verify_cert_status(s);
  if (gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &out, 0) == 0) {
    msg += std::string(" (") + reinterpret_cast<const char*>(out.data) + ")";
    gnutls_free(out.data);
  }
  return msg;
}

}  // namespace

Status Transport::start_tls(const TlsCredentials& creds, unsigned timeout_ms) {
  gnutls_session_t s = nullptr;
  // NO_SIGNAL: a client gone mid-send must not raise SIGPIPE in the server.
  if (const int rc = gnutls_init(&s, GNUTLS_SERVER | GNUTLS_NO_SIGNAL); rc < 0) return tls_error("TLS session", rc);
  int rc = gnutls_priority_set(s, creds.priority());
  if (rc >= 0 && creds.psk()) {
    rc = gnutls_credentials_set(s, GNUTLS_CRD_PSK, creds.psk_credentials());
  } else if (rc >= 0) {
    rc = gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, creds.x509());
    if (creds.verify_peer()) {
      gnutls_certificate_server_set_request(s, GNUTLS_CERT_REQUIRE);
      gnutls_session_set_verify_cert(s, nullptr, 0);  // the CA's signature; clients have no host name to check
    }
  }
  if (rc < 0) {
    gnutls_deinit(s);
    return tls_error("TLS session setup", rc);
  }
  // Our own non-blocking push and pull: the handshake waits in wait_for,
  // bounded by its timeout and the NBD handshake's deadline, and so does
  // every record afterwards.
  gnutls_transport_set_ptr(s, this);
  gnutls_transport_set_push_function(s, &Transport::push);
  gnutls_transport_set_pull_function(s, &Transport::pull);
  gnutls_transport_set_pull_timeout_function(s, &Transport::pull_timeout);
  const int64_t limit = timeout_ms ? now_ns() + int64_t{timeout_ms} * 1000000 : 0;
  const int64_t outer = deadline_ns_.load(std::memory_order_relaxed);
  set_deadline(outer && (!limit || outer < limit) ? outer : limit);
  bool timed_out = false;
  for (;;) {
    rc = gnutls_handshake(s);
    if (rc >= 0 || gnutls_error_is_fatal(rc) != 0) break;
    if (rc == GNUTLS_E_AGAIN && !wait_for(gnutls_record_get_direction(s) ? POLLOUT : POLLIN, 0)) {
      timed_out = true;
      break;
    }
  }
  set_deadline(outer);
  if (timed_out || rc < 0) {
    std::string msg = timed_out ? std::string("TLS handshake timed out") : handshake_error(s, rc);
    gnutls_deinit(s);
    return Status::invalid(std::move(msg));
  }
  session_ = s;
  return Status::OK();
}

int64_t Transport::now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool Transport::wait_for(short events, unsigned timeout_ms) {
  const int64_t start = now_ns();
  for (;;) {
    const int64_t stop = stop_ns_.load();
    int64_t deadline = deadline_ns_.load(std::memory_order_relaxed);
    if (stop && (!deadline || stop < deadline)) deadline = stop;
    if (timeout_ms) {
      const int64_t t = start + int64_t{timeout_ms} * 1000000;
      if (!deadline || t < deadline) deadline = t;
    }
    int wait_ms = -1;
    if (deadline) {
      const int64_t left = deadline - now_ns();
      if (left <= 0) return false;
      wait_ms = static_cast<int>(std::min<int64_t>((left + 999999) / 1000000, 1 << 30));
    }
    pollfd pfd[2] = {{fd_, events, 0}, {wake_fd_, POLLIN, 0}};
    const int r = ::poll(pfd, stop || wake_fd_ < 0 ? 1 : 2, wait_ms);
    if (r < 0 && errno != EINTR) return true;  // let the call itself fail with the error
    if (r > 0 && pfd[0].revents) return true;  // ready, or an error / hang-up the next call reports
    // Timed out (checked against the clock above), interrupted, or woken by
    // stop_after: look at the deadlines again.
  }
}

ssize_t Transport::push(void* self, const void* p, size_t n) {
  auto* t = static_cast<Transport*>(self);
  return ::send(t->fd_, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

ssize_t Transport::pull(void* self, void* p, size_t n) {
  auto* t = static_cast<Transport*>(self);
  return ::recv(t->fd_, p, n, MSG_DONTWAIT);
}

// GnuTLS asks this only where it must know whether a record is waiting
// (its default would take our pointer for a descriptor).
int Transport::pull_timeout(void* self, unsigned ms) {
  auto* t = static_cast<Transport*>(self);
  pollfd pfd{t->fd_, POLLIN, 0};
  const int wait = ms == GNUTLS_INDEFINITE_TIMEOUT ? -1 : static_cast<int>(ms);
  return ::poll(&pfd, 1, wait);
}

ssize_t Transport::plain_send(const char* p, size_t n) {
  for (;;) {
    const ssize_t k = ::send(fd_, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) return k;
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && wait_for(POLLOUT, send_timeout_ms_)) continue;
    return -1;
  }
}

ssize_t Transport::plain_recv(char* p, size_t n) {
  for (;;) {
    const ssize_t k = ::recv(fd_, p, n, MSG_DONTWAIT);
    if (k >= 0) return k;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      recv_error_ = std::strerror(errno);
      return -1;
    }
    if (!wait_for(POLLIN, 0)) {
      recv_error_ = "timed out";
      errno = ETIMEDOUT;
      return -1;
    }
  }
}

ssize_t Transport::send(const char* p, size_t n) {
  if (!session_) return plain_send(p, n);
  // The session stays locked while a partly sent record waits for the
  // socket: a record the reader took in between (a KeyUpdate that asks for
  // ours) changes GnuTLS's send state under the pending record, and the
  // retry then sent part of the stream twice (seen: 1 run in 6 of
  // NbdRegress.TlsKeyUpdate...). The reader waits meanwhile; a client that
  // writes without reading its replies is bounded by the send timeout.
  std::lock_guard g(session_mu_);
  for (;;) {
    const ssize_t k = gnutls_record_send(session_, p, n);
    if (k > 0) return k;
    if (k == GNUTLS_E_INTERRUPTED) continue;
    // AGAIN: the socket took part of the record; GnuTLS keeps the rest and
    // sends it when called again with the same arguments.
    if (k == GNUTLS_E_AGAIN && wait_for(POLLOUT, send_timeout_ms_)) continue;
    return -1;
  }
}

ssize_t Transport::recv(char* p, size_t n) {
  if (!session_) return plain_recv(p, n);
  for (;;) {
    ssize_t k;
    {
      std::lock_guard g(session_mu_);
      k = gnutls_record_recv(session_, p, n);
    }
    if (k >= 0) return k;
    if (k == GNUTLS_E_INTERRUPTED) continue;
    if (k == GNUTLS_E_AGAIN) {
      // The socket is empty, or the record read carried no data (a key
      // update, a session ticket): wait for the next one.
      if (wait_for(POLLIN, 0)) continue;
      recv_error_ = "timed out";
      errno = ETIMEDOUT;
      return -1;
    }
    if (k == GNUTLS_E_PREMATURE_TERMINATION) return 0;  // EOF without close_notify: the peer, or stop()
    recv_error_ = gnutls_strerror(static_cast<int>(k));
    return -1;
  }
}

void Transport::bye() {
  if (!session_) return;
  for (;;) {
    int rc;
    {
      std::lock_guard g(session_mu_);
      rc = gnutls_bye(session_, GNUTLS_SHUT_WR);
    }
    if (rc == GNUTLS_E_INTERRUPTED) continue;
    if (rc == GNUTLS_E_AGAIN && wait_for(POLLOUT, send_timeout_ms_)) continue;
    return;
  }
}

}  // namespace blkmq::nbd

// TLS for the NBD server, through GnuTLS: the credentials the server loads
// once at start (X.509 certificates from a directory, or pre-shared keys
// from a psktool file), and the Transport a Connection reads and writes,
// the plain socket until STARTTLS, a GnuTLS session on it afterwards.
//
// GnuTLS headers stay in tls.cc: the handles below are GnuTLS's own opaque
// pointer types, declared here so that includers need not see gnutls.h.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "blkmq/status.h"
#include "nbd/handshake.h"

struct gnutls_session_int;
struct gnutls_certificate_credentials_st;
struct gnutls_psk_server_credentials_st;
struct gnutls_priority_st;

namespace blkmq::nbd {

// What the operator asked for (nbdkit's option names: --tls, --tls-
// certificates, --tls-verify-peer, --tls-psk).
struct TlsConfig {
  TlsMode mode = TlsMode::off;  // on: STARTTLS offered; require: nothing is served before it
  // A directory with server-cert.pem and server-key.pem, ca-cert.pem
  // (needed with verify_peer) and optionally ca-crl.pem: nbdkit's and
  // qemu's file names.
  std::string certificates;
  bool verify_peer = false;     // X.509 only: clients must present a certificate the CA signed
  std::string psk_file;         // `username:hexkey` lines, as psktool writes them
};

// The server's credentials, loaded once by Server::listen and shared
// read-only by every connection's session (GnuTLS allows that).
class TlsCredentials {
 public:
  // Loads what `cfg` names (exactly one of certificates and psk_file must
  // be set). Control thread, at server start; errors name the file.
  static Result<std::unique_ptr<TlsCredentials>> load(const TlsConfig& cfg);
  ~TlsCredentials();
  TlsCredentials(const TlsCredentials&) = delete;
  TlsCredentials& operator=(const TlsCredentials&) = delete;

  bool psk() const { return psk_ != nullptr; }
  bool verify_peer() const { return verify_peer_; }
  gnutls_certificate_credentials_st* x509() const { return x509_; }
  gnutls_psk_server_credentials_st* psk_credentials() const { return psk_; }
  gnutls_priority_st* priority() const { return priority_; }

 private:
  TlsCredentials() = default;
  Status load_x509(const std::string& dir, bool verify_peer);
  Status load_psk(const std::string& file);

  gnutls_certificate_credentials_st* x509_ = nullptr;
  gnutls_psk_server_credentials_st* psk_ = nullptr;
  gnutls_priority_st* priority_ = nullptr;
  bool verify_peer_ = false;
};

// One connection's byte stream. Plain until start_tls() succeeds, then
// every byte goes through the TLS session.
//
// Threads: the connection's reader calls recv() (and start_tls(), bye(),
// set_deadline()); its writer calls send() (the reader too, during the
// handshake). Waits for the socket are poll()s outside any lock; the socket
// itself is only ever read and written with MSG_DONTWAIT. Under TLS every
// call into the session (gnutls_record_recv, gnutls_record_send) holds one
// mutex: a TLS 1.3 KeyUpdate that asks for ours changes the session's send
// state from the reader's receive, which must not meet the writer's send.
// A receive never holds it while it waits for the socket; a send holds it
// while a partly sent record waits for room (see send()), so under TLS a
// client that does not read its replies stalls its own requests too, until
// the send timeout.
class Transport {
 public:
  // Does not own fd. A send waits at most `send_timeout_ms` for the socket
  // to take more bytes (0: forever): a client that stops reading fails it.
  Transport(int fd, unsigned send_timeout_ms);
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  // Reader: runs the server side of a TLS handshake on the socket, bounded
  // by `timeout_ms` and by the deadline. On failure the stream is unusable
  // and the error says why (the GnuTLS error, and for a refused client
  // certificate, what was wrong with it).
  Status start_tls(const TlsCredentials& creds, unsigned timeout_ms);
  // Sends some of p[0..n): the bytes sent (> 0), or -1 on an error, when the
  // send timeout or the deadline ran out, or after abort().
  ssize_t send(const char* p, size_t n);
  // Receives up to n bytes, waiting until at least one is there (or until
  // the deadline): the bytes received, 0 on EOF (a shutdown(SHUT_RD)
  // included), -1 on an error or an expired deadline (errno ETIMEDOUT).
  // Records that carry no data (a KeyUpdate) are taken and waited past.
  ssize_t recv(char* p, size_t n);
  // Reader, at the end: close_notify, best effort (bounded by the send timeout).
  void bye();

  // Bounds every later wait, in both directions, by `deadline_ns` on the
  // steady clock (0: no deadline): the NBD handshake's whole-handshake
  // limit, or the transmission idle timeout. Reader thread.
  void set_deadline(int64_t deadline_ns) { deadline_ns_.store(deadline_ns, std::memory_order_relaxed); }

  // Any thread: from now on every wait, in both directions, ends by
  // `deadline_ns` at the latest, and waits under way are woken to see it.
  // The server's stop: no slow or silent client can hold it longer.
  void stop_after(int64_t deadline_ns);

  bool tls() const { return session_ != nullptr; }
  // Reader: why the last recv() failed (send errors need no words: the
  // client is gone or stopped reading).
  const std::string& recv_error() const { return recv_error_; }
  // The socket's steady-clock now, in ns (what set_deadline takes).
  static int64_t now_ns();

 private:
  // Waits for `events` on the socket up to `timeout_ms` (0: no limit) and
  // the deadline; false when either ran out.
  bool wait_for(short events, unsigned timeout_ms);
  ssize_t plain_send(const char* p, size_t n);
  ssize_t plain_recv(char* p, size_t n);
  static ssize_t push(void* self, const void* p, size_t n);
  static ssize_t pull(void* self, void* p, size_t n);
  static int pull_timeout(void* self, unsigned ms);

  const int fd_;
  const unsigned send_timeout_ms_;
  std::atomic<int64_t> deadline_ns_{0};
  std::atomic<int64_t> stop_ns_{0};
  int wake_fd_ = -1;       // eventfd: stop_after wakes the waits (never drained: waits then leave it out)
  gnutls_session_int* session_ = nullptr;
  std::mutex session_mu_;  // every gnutls_record_* call after the handshake
  std::string recv_error_;
};

}  // namespace blkmq::nbd

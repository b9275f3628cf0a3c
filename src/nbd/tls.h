// TLS for the NBD server, through GnuTLS: the credentials the server loads
// once at start (X.509 certificates from a directory, or pre-shared keys
// from a psktool file), and the Transport a Connection reads and writes,
// the plain socket until STARTTLS, a GnuTLS session on it afterwards.
//
// GnuTLS headers stay in tls.cc: the handles below are GnuTLS's own opaque
// pointer types, declared here so that includers need not see gnutls.h.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <memory>
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
// Threads: the connection's reader calls recv() (and start_tls(), bye());
// its writer calls send() (the reader too, during the handshake, while the
// writer has nothing to send). GnuTLS allows one thread in
// gnutls_record_recv and another in gnutls_record_send on one session at
// the same time, as long as no rehandshake happens (the server never asks
// for one, and one a client asks for ends its connection): the reader and
// writer rely on that.
// (A TLS 1.3 KeyUpdate that asks for the peer's would make recv send too;
// libnbd and qemu send none.)
class Transport {
 public:
  explicit Transport(int fd) : fd_(fd) {}  // does not own fd
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  // Reader: runs the server side of a TLS handshake on the socket, bounded
  // by `timeout_ms`. On failure the stream is unusable and the error says
  // why (the GnuTLS error, and for a refused client certificate, what was
  // wrong with it).
  Status start_tls(const TlsCredentials& creds, unsigned timeout_ms);
  // Sends some of p[0..n): the bytes sent (> 0), or -1 on an error or when
  // the socket's SO_SNDTIMEO ran out.
  ssize_t send(const char* p, size_t n);
  // Receives up to n bytes, blocking until at least one is there: the bytes
  // received, 0 on EOF (a shutdown(SHUT_RD) included), -1 on an error.
  // Under TLS, decrypted bytes GnuTLS already holds come first, without
  // waiting on the socket.
  ssize_t recv(char* p, size_t n);
  // Reader, at the end: close_notify, best effort (bounded by SO_SNDTIMEO).
  void bye();

  bool tls() const { return session_ != nullptr; }
  // The socket has a receive timeout (SO_RCVTIMEO, during the NBD
  // handshake): a TLS receive that runs out then fails with errno EAGAIN
  // instead of reading on.
  void set_recv_timeout(bool on) { recv_timeout_ = on; }
  // Reader: why the last recv() under TLS failed (send errors need no
  // words: the client is gone or stopped reading).
  const std::string& recv_error() const { return recv_error_; }

 private:
  const int fd_;
  gnutls_session_int* session_ = nullptr;
  bool recv_timeout_ = false;
  std::string recv_error_;
};

}  // namespace blkmq::nbd

// libFuzzer target for a real NBD Connection: the input is what a client
// sends after the greeting, fed over a socketpair to Connection::run() on a
// memory-backed null device, while this thread drains the server's replies.
// Where nbd_fuzz.cc drives the pure codec, this one drives the I/O loop:
// framing across socket reads, payloads received into their buffers, the
// skipped payloads of refused WRITEs, the 32 MiB close, byte-granular
// requests (RMW), BLOCK_STATUS and structured replies, FUA's FLUSH after
// TRIM, DISC in the middle of a request. Each input ends with EOF, so every
// run ends: a run that does not (a hang) is what libFuzzer's -timeout
// reports, and a leak or a bio that never completes shows as one too (the
// connection waits for every request before run() returns).
//
// Byte 0 picks the export's set-up (its minimum block, read-only, base:
// allocation); the rest is sent in pieces whose sizes byte 1 seeds.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "blkmq/device.h"
#include "nbd/connection.h"
#include "nbd/handshake.h"
#include "nbd/protocol.h"

namespace blkmq::nbd {
namespace {

struct Target {
  std::unique_ptr<Device> dev;
  HandshakeConfig cfgs[8];
  std::vector<Export> exports[8];
};

Target& target() {
  static Target* t = [] {
    auto* t = new Target;
    auto d = create_device("null", {{"size", "16"}, {"memory_backed", "1"}, {"discard", "1"}, {"irqmode", "0"}});
    if (!d.ok()) {
      std::fprintf(stderr, "null device: %s\n", d.status().message().c_str());
      std::abort();
    }
    t->dev = std::move(*d);
    for (int c = 0; c < 8; c++) {
      ExportDef e;
      e.name = "disk";
      e.size = t->dev->size_bytes();
      e.min_block = (c & 1) ? 512 : 1;
      e.tx_flags = kTxSendFlush | kTxSendFua | kTxSendTrim | kTxSendFastZero | ((c & 2) ? kTxReadOnly : 0);
      e.base_allocation = (c & 4) != 0;
      t->cfgs[c].exports = {e};
      t->exports[c] = {{e, &t->dev->queue(), t->dev.get()}};
    }
    return t;
  }();
  return *t;
}

// Sends `in` in pieces and reads everything the server sends until it
// closes, with one poll loop, so neither side can block the other.
void converse(int fd, const uint8_t* in, size_t n, uint8_t seed) {
  size_t sent = 0;
  bool shut = false;
  char buf[65536];
  uint32_t x = seed | 1u;
  for (;;) {
    pollfd p{fd, static_cast<short>(POLLIN | (shut ? 0 : POLLOUT)), 0};
    if (::poll(&p, 1, 5000) <= 0) return;  // a server that neither reads nor writes: libFuzzer's timeout tells
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
      const ssize_t k = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
      if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) return;
    }
    if (!shut && (p.revents & POLLOUT)) {
      x = x * 1103515245u + 12345u;
      const size_t piece = std::min<size_t>(n - sent, 1 + (x >> 16) % 4096);
      const ssize_t k = piece ? ::send(fd, in + sent, piece, MSG_NOSIGNAL | MSG_DONTWAIT) : 0;
      if (k > 0) sent += static_cast<size_t>(k);
      if (sent == n || (k < 0 && errno != EAGAIN && errno != EINTR)) {
        ::shutdown(fd, SHUT_WR);  // EOF: the connection must end
        shut = true;
      }
    }
  }
}

}  // namespace
}  // namespace blkmq::nbd

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace blkmq::nbd;
  if (size < 2) return 0;
  Target& t = target();
  const int c = data[0] & 7;
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return 0;
  ConnLimits lim;
  lim.handshake_timeout_ms = 2000;
  lim.send_timeout_ms = 2000;
  auto conn = std::make_unique<Connection>(sv[0], t.cfgs[c], t.exports[c], lim, nullptr);
  std::thread server([&] { conn->run(); });
  converse(sv[1], data + 2, size - 2, data[1]);
  server.join();
  conn.reset();  // closes sv[0]
  ::close(sv[1]);
  return 0;
}

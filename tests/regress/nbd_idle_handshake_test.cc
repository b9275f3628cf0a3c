// Regression: a connection that never finished its handshake held its slot
// forever. With max_connections (16 by default) clients that connect and
// send nothing, every later client was closed before the greeting until one
// of them left: anyone able to connect could lock the export. The handshake
// now has a deadline (ConnLimits::handshake_timeout_ms, 10 s by default).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "blkmq/device.h"
#include "nbd/nbd_test_util.h"
#include "nbd/server.h"

namespace blkmq::nbd {
namespace {

int connect_unix(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  const timeval tv{5, 0};  // a wrong server fails the test instead of hanging it
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

std::string read_n(int fd, size_t n) {
  std::string s(n, '\0');
  size_t got = 0;
  for (ssize_t k; got < n && (k = ::read(fd, s.data() + got, n - got)) > 0;) got += static_cast<size_t>(k);
  s.resize(got);
  return s;
}

// The peer closed: end of file, not the 5 s receive limit.
bool closed_by_peer(int fd) {
  char c;
  return ::read(fd, &c, 1) == 0;
}

// Greeting, flags and GO on the default export; true at the ACK.
bool go(int fd) {
  if (read_n(fd, 18).size() != 18) return false;
  const std::string msg = test::client_flags(kClientFixedNewstyle | kClientNoZeroes) +
                          test::option(kOptGo, test::go_data(""));
  if (::send(fd, msg.data(), msg.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(msg.size())) return false;
  for (std::string h; (h = read_n(fd, 20)).size() == 20;) {
    const uint32_t type = get32(h.data() + 12);
    read_n(fd, get32(h.data() + 16));
    if (type == kRepAck) return true;
    if (type & kRepErrBit) return false;
  }
  return false;
}

TEST(NbdRegress, IdleHandshakesCannotLockOutClients) {
  auto dev = create_device("null", {{"size", "16"}});
  ASSERT_TRUE(dev.is_ok()) << dev.status().message();
  ExportDef e;
  e.size = (*dev)->size_bytes();
  HandshakeConfig hs;
  hs.exports = {e};
  const std::vector<Export> exports = {{e, &(*dev)->queue()}};
  ServerConfig sc;
  sc.socket_path = testing::TempDir() + "blkmq_idle_hs_" + std::to_string(getpid()) + ".sock";
  sc.max_connections = 2;
  sc.conn.handshake_timeout_ms = 300;
  auto server = Server::listen(sc, hs, exports);
  ASSERT_TRUE(server.is_ok()) << server.status().message();
  std::thread serving([&] { (*server)->serve(); });

  // Two clients take both slots and stall after the greeting.
  const int idle[2] = {connect_unix(sc.socket_path), connect_unix(sc.socket_path)};
  for (int fd : idle) EXPECT_EQ(read_n(fd, 18).size(), 18u);
  // The deadline ends them ...
  for (int fd : idle) EXPECT_TRUE(closed_by_peer(fd)) << "a stalled handshake was not ended";
  // ... and a client that really speaks gets in. The server reaps finished
  // connections on its next poll, so allow it a few tries.
  bool served = false;
  for (int i = 0; i < 30 && !served; i++) {
    const int fd = connect_unix(sc.socket_path);
    served = go(fd);
    ::close(fd);
    if (!served) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(served) << "the stalled handshakes still hold every connection slot";
  // A client inside transmission may stay idle past the handshake deadline.
  const int fd = connect_unix(sc.socket_path);
  ASSERT_TRUE(go(fd));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const std::string rd = encode_request(Request{0, kCmdRead, 1, 0, 512});
  ASSERT_EQ(::send(fd, rd.data(), rd.size(), MSG_NOSIGNAL), static_cast<ssize_t>(rd.size()));
  const std::string reply = read_n(fd, kSimpleReplySize);
  ASSERT_EQ(reply.size(), kSimpleReplySize) << "an idle connection in transmission was closed";
  EXPECT_EQ(get32(reply.data() + 4), 0u);
  ::close(fd);
  for (int f : idle) ::close(f);
  (*server)->stop();
  serving.join();
}

}  // namespace
}  // namespace blkmq::nbd

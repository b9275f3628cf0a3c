// Regression: a connection that never finished its handshake held its slot
// forever. With max_connections (16 by default) clients that connect and
// send nothing, every later client was closed before the greeting until one
// of them left: anyone able to connect could lock the export. The handshake
// now has a deadline (ConnLimits::handshake_timeout_ms, 10 s by default).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "support/nbd_regress_util.h"

namespace blkmq::nbd::regress {
namespace {

TEST(NbdRegress, IdleHandshakesCannotLockOutClients) {
  auto dev = create_device("null", {{"size", "16"}});
  ASSERT_TRUE(dev.ok()) << dev.status().message();
  ServerConfig sc;
  sc.max_connections = 2;
  sc.conn.handshake_timeout_ms = 300;
  Served s(std::move(*dev), sc);

  // Two clients take both slots and stall after the greeting.
  const int idle[2] = {connect_unix(s.path()), connect_unix(s.path())};
  for (int fd : idle) EXPECT_EQ(read_n(fd, 18).size(), 18u);
  // The deadline ends them ...
  for (int fd : idle) EXPECT_TRUE(closed_by_peer(fd)) << "a stalled handshake was not ended";
  // ... and a client that really speaks gets in. The server reaps finished
  // connections on its next poll, so allow it a few tries.
  bool served = false;
  for (int i = 0; i < 30 && !served; i++) {
    const int fd = connect_unix(s.path());
    served = go(fd);
    ::close(fd);
    if (!served) std::this_thread::sleep_for(std::chrono::milliseconds(100));  // a client's retry
  }
  EXPECT_TRUE(served) << "the stalled handshakes still hold every connection slot";
  // A client inside transmission may stay idle past the handshake deadline.
  const int fd = connect_unix(s.path());
  ASSERT_TRUE(go(fd));
  // Idle for longer than the handshake deadline: real time is the point.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(request(fd, kCmdRead, 0, 512), 0u) << "an idle connection in transmission was closed";
  ::close(fd);
  for (int f : idle) ::close(f);
}

}  // namespace
}  // namespace blkmq::nbd::regress

// Regression: the handshake deadline covered only receives. A client that
// sent options and never read the replies blocked the server's send for
// the 30 s send timeout (and could start again), holding its connection
// slot past the handshake deadline. The deadline now bounds every wait of
// the handshake, sends included.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "support/nbd_regress_util.h"

namespace blkmq::nbd::regress {
namespace {

TEST(NbdRegress, HandshakeDeadlineEndsAClientThatDoesNotReadItsReplies) {
  auto dev = create_device("null", {{"size", "16"}});
  ASSERT_TRUE(dev.ok()) << dev.status().message();
  ServerConfig sc;
  sc.max_connections = 1;
  sc.conn.handshake_timeout_ms = 300;
  Served s(std::move(*dev), sc);
  // Enough LIST options that their replies fill the socket both ways.
  std::string opts = test::client_flags(kClientFixedNewstyle | kClientNoZeroes);
  for (int i = 0; i < 40000; i++) opts += test::option(kOptList);
  const int stuck = connect_unix(s.path());
  std::thread flood([&] { send_all(stuck, opts); });  // may block: the server stops reading too
  const auto t0 = std::chrono::steady_clock::now();
  bool served = false;
  while (!served && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(8)) {
    const int fd = connect_unix(s.path());
    served = go(fd);
    ::close(fd);
    if (!served) std::this_thread::sleep_for(std::chrono::milliseconds(100));  // a client's retry while the deadline runs
  }
  EXPECT_TRUE(served) << "a client that never reads its option replies held the only slot";
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  ::shutdown(stuck, SHUT_RDWR);
  flood.join();
  ::close(stuck);
}

}  // namespace
}  // namespace blkmq::nbd::regress

// Regression: requests that arrived after the server began to stop (SIGTERM
// in `blkmq nbd`) were never answered ESHUTDOWN: stop() shut the socket's
// read side and the client saw its connection drop. The spec's soft
// disconnect answers them ESHUTDOWN until the client leaves (or a grace
// period ends).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "support/nbd_regress_util.h"

namespace blkmq::nbd::regress {
namespace {

TEST(NbdRegress, RequestsAfterStopAreAnsweredEshutdown) {
  auto dev = create_device("null", {{"size", "16"}});
  ASSERT_TRUE(dev.ok()) << dev.status().message();
  ServerConfig sc;
  sc.conn.shutdown_grace_ms = 5000;
  auto s = std::make_unique<Served>(std::move(*dev), sc);
  const int fd = connect_unix(s->path());
  ASSERT_TRUE(go(fd));
  ASSERT_EQ(request(fd, kCmdRead, 0, 512), 0u);
  std::thread stopper([&] { s.reset(); });  // stop() and join: waits for the client to leave
  // The stop reaches the connection soon; until then reads still succeed.
  uint32_t err = 0;
  for (int i = 0; i < 200 && err == 0; i++) {
    err = request(fd, kCmdRead, 0, 512);
    // A client's paced retries: no reply but this one says the stop has
    // reached the connection.
    if (err == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(err, uint32_t{kErrShutdown}) << "a request after stop() was not answered ESHUTDOWN";
  // The client disconnects as asked; the stop then ends at once, not at the grace's end.
  const auto t0 = std::chrono::steady_clock::now();
  send_all(fd, encode_request(Request{0, kCmdDisc, 2, 0, 0}));
  stopper.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
  ::close(fd);
}

TEST(NbdRegress, StopDoesNotWaitPastTheGraceForASilentClient) {
  auto dev = create_device("null", {{"size", "16"}});
  ASSERT_TRUE(dev.ok()) << dev.status().message();
  ServerConfig sc;
  sc.conn.shutdown_grace_ms = 200;
  auto s = std::make_unique<Served>(std::move(*dev), sc);
  const int fd = connect_unix(s->path());
  ASSERT_TRUE(go(fd));
  const auto t0 = std::chrono::steady_clock::now();
  s.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
  EXPECT_TRUE(closed_by_peer(fd));
  ::close(fd);
}

}  // namespace
}  // namespace blkmq::nbd::regress

// Regression: stopping the server waited for a client that does not read
// its replies. Connection::stop() shut the socket for reading only, so a
// writer blocked on a full socket stayed there until the send timeout (30 s
// by default) and serve() with it. The server now gives in-flight requests
// stop_grace_ms and then shuts every remaining connection down both ways.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <thread>

#include "support/nbd_regress_util.h"

namespace blkmq::nbd::regress {
namespace {

TEST(NbdRegress, StopDoesNotWaitForAClientThatDoesNotRead) {
  auto dev = create_device("null", {{"size", "64"}});
  ASSERT_TRUE(dev.ok()) << dev.status().message();
  ServerConfig sc;
  sc.stop_grace_ms = 200;
  auto s = std::make_unique<Served>(std::move(*dev), sc);
  const int fd = connect_unix(s->path());
  ASSERT_TRUE(go(fd));
  // 32 MiB of READ replies the client never takes: far more than the
  // socket buffers hold, so the server's writer blocks in send.
  std::string reqs;
  for (uint64_t i = 0; i < 32; i++) reqs += encode_request(Request{0, kCmdRead, i, i << 20, 1u << 20});
  ASSERT_TRUE(send_all(fd, reqs));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the replies fill the buffers (time, not a signal)
  const auto t0 = std::chrono::steady_clock::now();
  s.reset();  // stop() and serve()'s return
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_LT(took, std::chrono::seconds(3)) << "stop waited "
      << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms for a client that does not read";
  ::close(fd);
}

}  // namespace
}  // namespace blkmq::nbd::regress

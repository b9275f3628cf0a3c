// Regression: one limit (max_connections, 16) covered clients still in
// their handshake and served ones alike, so 64 sockets that connected and
// sent nothing held every slot, and a real client was closed before the
// greeting until the handshake deadline (10 s) ended them. Handshakes now
// have slots of their own (max_handshakes), and when those are all held a
// new client evicts the one stalled longest (handshake_evict_ms, 1 s).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

#include "support/nbd_regress_util.h"

namespace blkmq::nbd::regress {
namespace {

TEST(NbdRegress, IdleConnectorsDoNotLockOutARealClient) {
  if (!test::have("nbdinfo")) GTEST_SKIP() << "nbdinfo (libnbd-bin) not installed";
  auto dev = create_device("null", {{"size", "16"}});
  ASSERT_TRUE(dev.ok()) << dev.status().message();
  Served s(std::move(*dev), ServerConfig{});  // the defaults: 16 + 16 slots, 10 s handshake deadline
  std::vector<int> idle;
  for (int i = 0; i < 64; i++) idle.push_back(connect_unix(s.path()));
  // nbdinfo may be refused until the oldest stalled handshake is 1 s old;
  // it must get in well before the 10 s deadline would free a slot.
  const auto t0 = std::chrono::steady_clock::now();
  const std::string cmd = "nbdinfo --size 'nbd+unix:///?socket=" + s.path() + "' >/dev/null 2>&1";
  bool served = false;
  while (!served && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5)) {
    served = test::run_bounded(cmd, 10) == 0;
    if (!served) std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the eviction age passes by time
  }
  EXPECT_TRUE(served) << "64 idle connectors kept nbdinfo out for 5 s";
  for (int fd : idle) ::close(fd);
}

}  // namespace
}  // namespace blkmq::nbd::regress

// Regression: memory had no server-wide bound. Each connection could hold
// 64 MiB of payload in flight, up to max_connections of them, and running
// out ended every connection. ServerConfig::max_inflight_bytes (by default
// an eighth of the machine's memory) now bounds the buffers of all
// connections together; a request that does not fit waits.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <sstream>
#include <thread>
#include <vector>

#include "support/nbd_regress_util.h"

namespace blkmq::nbd::regress {
namespace {

unsigned device_inflight(Device& d) {
  std::istringstream in(*d.queue().attr("inflight"));
  unsigned r = 0, w = 0;
  in >> r >> w;
  return r + w;
}

TEST(NbdRegress, ServerWideByteBudgetBoundsPayloadInFlightOverAllConnections) {
  // 20 ms per request: requests pile up at the device unless something holds them back.
  auto dev = create_device("null", {{"size", "256"}, {"irqmode", "2"}, {"completion_nsec", "20000000"},
                                    {"max_sectors", "16384"}});  // one request per READ
  ASSERT_TRUE(dev.ok()) << dev.status().message();
  ServerConfig sc;
  sc.max_inflight_bytes = 32u << 20;  // four 8 MiB READs
  Served s(std::move(*dev), sc);
  constexpr int kConns = 4, kReads = 4;
  constexpr uint32_t kLen = 8u << 20;
  std::atomic<int> answered{0}, failed{0};
  std::atomic<bool> done{false};
  std::vector<std::thread> ts;
  for (int c = 0; c < kConns; c++) {
    ts.emplace_back([&, c] {
      const int fd = connect_unix(s.path());
      if (!go(fd)) {
        failed++;
        return;
      }
      std::string batch;  // all of them at once: the connection's own bound (64 MiB) lets them in
      for (int i = 0; i < kReads; i++) batch += encode_request(Request{0, kCmdRead, uint64_t(i), uint64_t(c) * 64 * kLen / 8, kLen});
      send_all(fd, batch);
      for (int i = 0; i < kReads; i++) {
        const std::string h = read_n(fd, kSimpleReplySize);
        if (h.size() != kSimpleReplySize || get32(h.data() + 4) != 0 || read_n(fd, kLen).size() != kLen) {
          failed++;
          break;
        }
        answered++;
      }
      ::close(fd);
    });
  }
  unsigned peak = 0;
  std::thread sampler([&] {
    while (!done.load()) {
      peak = std::max(peak, device_inflight(s.device()));
      std::this_thread::sleep_for(std::chrono::milliseconds(1));  // a sampler's period
    }
  });
  for (auto& t : ts) t.join();
  done = true;
  sampler.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(answered.load(), kConns * kReads);
  EXPECT_GT(peak, 0u);
  EXPECT_LE(peak, 4u) << "more payload in flight than the server-wide budget allows";
}

}  // namespace
}  // namespace blkmq::nbd::regress

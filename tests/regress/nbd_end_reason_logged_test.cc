// Regression: the reason a connection ended was never logged, so a failed
// TLS handshake, a wrong PSK, a stalled handshake or a protocol error was
// invisible to the operator. The server now logs every end but the
// ordinary ones (DISC, ABORT, a close between requests).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "support/nbd_regress_util.h"

namespace blkmq::nbd::regress {
namespace {

struct Log {
  std::mutex mu;
  std::vector<std::string> lines;
  bool has(const std::string& s) {
    std::lock_guard g(mu);
    for (const std::string& l : lines)
      if (l.find(s) != std::string::npos) return true;
    return false;
  }
};

TEST(NbdRegress, WhyAConnectionEndedIsLogged) {
  auto dev = create_device("null", {{"size", "16"}});
  ASSERT_TRUE(dev.ok()) << dev.status().message();
  Log log;
  ServerConfig sc;
  sc.conn.handshake_timeout_ms = 200;
  sc.log = [&](const std::string& l) {
    std::lock_guard g(log.mu);
    log.lines.push_back(l);
  };
  {
    Served s(std::move(*dev), sc);
    const int stalled = connect_unix(s.path());  // takes the greeting, says nothing
    EXPECT_EQ(read_n(stalled, 18).size(), 18u);
    EXPECT_TRUE(closed_by_peer(stalled));
    const int bad = connect_unix(s.path());
    ASSERT_TRUE(go(bad));
    send_all(bad, std::string(28, '\xee'));  // a request with a bad magic
    EXPECT_TRUE(closed_by_peer(bad));
    const int polite = connect_unix(s.path());
    ASSERT_TRUE(go(polite));
    send_all(polite, encode_request(Request{0, kCmdDisc, 1, 0, 0}));
    EXPECT_TRUE(closed_by_peer(polite));
    for (int fd : {stalled, bad, polite}) ::close(fd);
  }  // the server's stop joins and logs what is left
  EXPECT_TRUE(log.has("connection ended: handshake timed out"));
  EXPECT_TRUE(log.has("connection ended: bad request magic"));
  EXPECT_FALSE(log.has("DISC")) << "an ordinary DISC was logged";
}

}  // namespace
}  // namespace blkmq::nbd::regress

// Regression: the control server served one client at a time with blocking
// sends. A client that sent requests and never read the answers blocked it
// in send() forever: every other client waited, and so did the server's
// stop (and with it `blkmq nbd`'s exit). Clients now have a thread each,
// sends a 2 s timeout, and stop shuts a stuck client's socket down.
#include <gtest/gtest.h>

#if BLKMQ_REGRESS_TOOLS
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>

#include "control/control.h"
#include "support/nbd_regress_util.h"
#include "support/watchdog.h"

namespace blkmq::nbd::regress {
namespace {

TEST(ControlRegress, StuckClientDelaysNeitherOthersNorStop) {
  blkmq::test::Watchdog wd("a control client that never reads", std::chrono::seconds(30));
  auto dev = create_device("null", {{"size", "16"}});
  ASSERT_TRUE(dev.ok()) << dev.status().message();
  const std::string path = temp_path("ctl_stuck");
  auto s = control::Server::start(path, {&(*dev)->queue()});
  ASSERT_TRUE(s.ok()) << s.status().message();

  // Thousands of "attrs" requests (an answer of about 1 KiB each) sent at
  // once, none read: the answers overrun the socket buffers and the
  // server's send to this client blocks.
  const int stuck = connect_unix(path);
  const std::string req = R"({"op":"attrs","dev":")" + (*dev)->queue().name() + "\"}\n";
  std::string many;
  for (int i = 0; i < 4000; i++) many += req;
  ASSERT_TRUE(send_all(stuck, many));

  // Another client is answered meanwhile (its 5 s receive limit fails the
  // test rather than hanging it).
  const int other = connect_unix(path);
  ASSERT_TRUE(send_all(other, "{\"op\":\"list\"}\n"));
  std::string answer;
  for (char c; answer.find('\n') == std::string::npos && read_some(other, &c, 1) == 1;) answer += c;
  EXPECT_NE(answer.find("\"ok\":true"), std::string::npos) << "a second client was not served: '" << answer << "'";

  const auto t0 = std::chrono::steady_clock::now();
  s->reset();
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_LT(took, std::chrono::seconds(1))
      << "stop took " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
  ::close(stuck);
  ::close(other);
}

}  // namespace
}  // namespace blkmq::nbd::regress
#endif

// Accepted TCP connections carry keepalive with the server's timings (a
// peer that vanished without a FIN frees its slot in minutes, not the
// kernel default's two hours), read back from the kernel with ss(8).
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "nbd/server.h"
#include "support/nbd_test_util.h"

namespace blkmq::nbd {
namespace {

std::string command_output(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[512];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  ::pclose(p);
  return out;
}

TEST(NbdServer, TcpConnectionsGetKeepalive) {
  if (!test::have("ss")) GTEST_SKIP() << "ss (iproute2) not installed";
  static const HandshakeConfig hs;
  static const std::vector<Export> none;
  ServerConfig sc;
  sc.port = 0;
  auto s = Server::listen(sc, hs, none);
  ASSERT_TRUE(s.ok()) << s.status().message();
  std::thread t([&] { (*s)->serve(); });
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>((*s)->port()));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  EXPECT_EQ(test::read_exactly(fd, 18).size(), 18u);  // the greeting: the server has set its options
  const std::string ss = command_output("ss -tnoH state established '( sport = :" + std::to_string((*s)->port()) +
                                        " )'");
  // ss shows the server's socket's timer: keepalive, due within 60 s.
  EXPECT_NE(ss.find("timer:(keepalive,"), std::string::npos) << ss;
  EXPECT_EQ(ss.find("timer:(keepalive,1"), std::string::npos) << "longer than 60 s idle? " << ss;
  ::close(fd);
  (*s)->stop();
  t.join();
}

}  // namespace
}  // namespace blkmq::nbd

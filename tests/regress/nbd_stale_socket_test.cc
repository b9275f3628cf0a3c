// A listener must still replace a stale socket (the file a server that died
// left behind: nobody answers a connect on it), or every crash would need a
// manual rm before a restart; and a server that ends removes its socket file
// only while it is still its own. Regression for the second: it unlinked
// whatever was at its path on the way out, removing the socket of a server
// started there after the first one's file was removed.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "support/nbd_regress_util.h"
#if BLKMQ_REGRESS_TOOLS
#include "control/control.h"
#endif

namespace blkmq::nbd::regress {
namespace {

// A socket file nobody listens on: bound, then closed without unlink.
void make_stale_socket(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << std::strerror(errno);
  ::close(fd);
}

bool is_socket(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
}

TEST(NbdRegress, StaleSocketIsReplaced) {
  const std::string path = temp_path("stale");
  make_stale_socket(path);
  {
    auto s = listen_at(path);
    ASSERT_TRUE(s.ok()) << s.status().message();
    const int fd = connect_unix(path);  // the listener is the new one
    ::close(fd);
  }
  EXPECT_FALSE(is_socket(path)) << "the server left its socket behind";
#if BLKMQ_REGRESS_TOOLS
  make_stale_socket(path);
  {
    auto c = control::Server::start(path, {});
    ASSERT_TRUE(c.ok()) << c.status().message();
    auto cl = control::Client::connect(path);
    ASSERT_TRUE(cl.ok()) << cl.status().message();
    EXPECT_TRUE((*cl)->call(R"({"op":"list"})").ok());
  }
  EXPECT_FALSE(is_socket(path)) << "the control server left its socket behind";
#endif
}

TEST(NbdRegress, EndingServerLeavesAnotherServersSocket) {
  const std::string path = temp_path("owned");
  auto first = listen_at(path);
  ASSERT_TRUE(first.ok()) << first.status().message();
  ::unlink(path.c_str());  // an operator removed it; a new server starts there
  auto second = listen_at(path);
  ASSERT_TRUE(second.ok()) << second.status().message();
  first->reset();
  EXPECT_TRUE(is_socket(path)) << "the first server removed the second one's socket";
  const int fd = connect_unix(path);
  ::close(fd);
  second->reset();
  EXPECT_FALSE(is_socket(path));
}

}  // namespace
}  // namespace blkmq::nbd::regress

// Regression: a second server given the path of a socket a first server
// still listened on unlinked it and bound its own, silently taking every
// new client from the first. A live socket (one a connect() reaches) is now
// refused as "in use", and the first server keeps serving.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "support/nbd_regress_util.h"
#if BLKMQ_REGRESS_TOOLS
#include "control/control.h"
#endif

namespace blkmq::nbd::regress {
namespace {

TEST(NbdRegress, LiveSocketIsNotTakenOver) {
  auto dev = create_device("null", {{"size", "16"}});
  ASSERT_TRUE(dev.ok()) << dev.status().message();
  Served first(std::move(*dev), ServerConfig{});
  auto second = listen_at(first.path());
  EXPECT_FALSE(second.ok()) << "a second server took over a live socket";
  if (!second.ok()) {
    EXPECT_NE(second.status().message().find("in use"), std::string::npos) << second.status().message();
    EXPECT_NE(second.status().message().find(first.path()), std::string::npos) << second.status().message();
  }
  // New clients still reach the first server (the second never serves).
  const int fd = connect_unix(first.path());
  EXPECT_TRUE(go(fd)) << "the first server's socket no longer reaches it";
  ::close(fd);
}

#if BLKMQ_REGRESS_TOOLS
TEST(NbdRegress, LiveControlSocketIsNotTakenOver) {
  const std::string path = temp_path("ctl_live");
  auto first = control::Server::start(path, {});
  ASSERT_TRUE(first.ok()) << first.status().message();
  auto second = control::Server::start(path, {});
  EXPECT_FALSE(second.ok()) << "a second control server took over a live socket";
  if (!second.ok()) {
    EXPECT_NE(second.status().message().find("in use"), std::string::npos) << second.status().message();
  }
  auto c = control::Client::connect(path);
  ASSERT_TRUE(c.ok()) << c.status().message();
  auto answer = (*c)->call(R"({"op":"list"})");
  ASSERT_TRUE(answer.ok()) << answer.status().message();
  EXPECT_NE(answer->find("\"ok\":true"), std::string::npos) << *answer;
}
#endif

}  // namespace
}  // namespace blkmq::nbd::regress

// Regression: a listener unlinked whatever was at its path before binding,
// so `blkmq nbd --socket disk.img` (or `--control disk.img`) deleted the
// image it was meant to serve. Any file that is not a socket is now refused
// with an error naming the path, and left as it was.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "support/nbd_regress_util.h"
#if BLKMQ_REGRESS_TOOLS
#include "control/control.h"
#endif

namespace blkmq::nbd::regress {
namespace {

std::string contents(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(NbdRegress, SocketPathOnAnImageFileKeepsTheFile) {
  const std::string img = temp_path("image");
  std::ofstream(img) << "the image's bytes";
  auto s = listen_at(img);
  ASSERT_FALSE(s.ok()) << "the server listened on a regular file's path";
  EXPECT_NE(s.status().message().find(img), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find("not a socket"), std::string::npos) << s.status().message();
  EXPECT_EQ(contents(img), "the image's bytes") << "the file at --socket was removed or changed";
  ::unlink(img.c_str());
}

#if BLKMQ_REGRESS_TOOLS
TEST(NbdRegress, ControlPathOnAnImageFileKeepsTheFile) {
  const std::string img = temp_path("ctl_image");
  std::ofstream(img) << "the image's bytes";
  auto c = control::Server::start(img, {});
  ASSERT_FALSE(c.ok()) << "the control server listened on a regular file's path";
  EXPECT_NE(c.status().message().find(img), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find("not a socket"), std::string::npos) << c.status().message();
  EXPECT_EQ(contents(img), "the image's bytes") << "the file at --control was removed or changed";
  ::unlink(img.c_str());
}
#endif

}  // namespace
}  // namespace blkmq::nbd::regress

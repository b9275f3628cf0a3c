// Regression: Connection::complete() woke the writer after unlocking. The
// writer could then send the last reply, the reader find the connection
// idle and the server destroy it, while end_io (on the driver's completion
// thread) was still about to notify the connection's condition variable:
// TSan saw the destroy race the notify. Many short connections whose last
// reply completes on a timer thread just before DISC give that window every
// chance; ASan and TSan watch it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "support/nbd_regress_util.h"

namespace blkmq::nbd::regress {
namespace {

TEST(NbdRegress, ConnectionEndsRightAfterItsLastReply) {
  auto dev = create_device("null", {{"size", "64"}, {"irqmode", "2"}, {"completion_nsec", "20000"}});
  ASSERT_TRUE(dev.ok()) << dev.status().message();
  Served s(std::move(*dev), ServerConfig{}, 512);
  for (int i = 0; i < 300; i++) {
    const int fd = connect_unix(s.path());
    ASSERT_TRUE(go(fd));
    ASSERT_EQ(request(fd, kCmdWrite, 4096 * static_cast<uint64_t>(i), 4096, std::string(4096, 'x')), 0u);
    Request disc;
    disc.type = kCmdDisc;
    send_all(fd, encode_request(disc));
    ::close(fd);
  }
}

}  // namespace
}  // namespace blkmq::nbd::regress

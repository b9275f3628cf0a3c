// Regression: a trace ended by trace/enable=0 (through --control, or a
// program's set_attr) threw its drop count away, and so did the end of a
// `blkmq nbd` trace (the queue's teardown stopped it): at full speed
// millions of events were lost and nothing said so. The count now stays
// readable in trace/dropped after the trace stopped, and the control
// socket's answer to the write that stopped it carries the warning.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "blkmq/blkmq.h"
#include "support/verified_io.h"

#if BLKMQ_REGRESS_TOOLS
#include <nlohmann/json.hpp>

#include "control/control.h"
#endif

namespace blkmq::test {
namespace {

// A buffer smaller than one record: every event is dropped.
void lossy_trace(Queue& q, const std::string& dir) {
  ASSERT_TRUE(q.start_blktrace(dir, 1));
  std::vector<uint8_t> buf(4096);
  for (int i = 0; i < 4; i++) ASSERT_EQ(q.write_sync(buf.data(), i * 4096ull, 4096), BlkStatus::ok);
}

TEST(BlktraceRegress, DropsOfATraceStoppedByItsAttributeStayReadable) {
  auto dev = make_null_device({{"size", "16"}});
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  lossy_trace(q, testing::TempDir() + "blkmq_regress_drops_attr");
  ASSERT_TRUE(q.set_attr("trace/enable", "0"));
  EXPECT_GE(std::stoull(*q.attr("trace/dropped")), 16u) << "Q G D C of each write";
}

#if BLKMQ_REGRESS_TOOLS
TEST(BlktraceRegress, TheControlSocketsStopWarnsOfTheDrops) {
  auto dev = make_null_device({{"size", "16"}});
  ASSERT_TRUE(dev);
  Queue& q = dev->queue();
  auto s = control::Server::start(testing::TempDir() + "blkmq_regress_drops.sock", {&q});
  ASSERT_TRUE(s) << s.status().message();
  lossy_trace(q, testing::TempDir() + "blkmq_regress_drops_ctl");
  testing::internal::CaptureStderr();
  const auto a = nlohmann::json::parse(
      (*s)->handle(R"({"op":"set","dev":")" + q.name() + R"(","attr":"trace/enable","value":"0"})"));
  testing::internal::GetCapturedStderr();
  ASSERT_TRUE(a.contains("warning")) << a.dump();
  EXPECT_NE(a["warning"].get<std::string>().find("events dropped"), std::string::npos);
}
#endif

}  // namespace
}  // namespace blkmq::test

// The public driver registry (blkmq/driver/device_driver.h): built-ins are
// there without being asked for, an out-of-tree driver registers once and
// create_device() makes its devices, a taken name is refused as a taken
// scheduler name is (EEXIST, naming it).
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <string>

#include "blkmq/device.h"
#include "blkmq/driver/device_driver.h"
#include "blkmq/elevator/elevator.h"

namespace blkmq {
namespace {

Result<std::unique_ptr<Device>> refuse_all(const ParamMap& params) {
  return Status::error(ENODEV, "test-driver: made with " + std::to_string(params.size()) + " parameters");
}

bool listed(const std::vector<std::string>& names, const std::string& n) {
  return std::find(names.begin(), names.end(), n) != names.end();
}

TEST(DeviceRegistry, BuiltinsAreThereWithoutBeingAskedFor) {
  const std::vector<std::string> names = device_drivers();
  for (const char* n : {"null", "scsi", "ublk", "uring"}) EXPECT_TRUE(listed(names, n)) << n;
  const std::vector<std::string> elevators = registered_elevators();
  ASSERT_GE(elevators.size(), 3u);
  EXPECT_EQ(std::vector<std::string>(elevators.begin(), elevators.begin() + 3),
            (std::vector<std::string>{"mq-deadline", "kyber", "bfq"}))
      << "the kernel's order, whatever the folders' order";
}

TEST(DeviceRegistry, AnOutOfTreeDriverRegistersOnceAndMakesDevices) {
  static const DeviceDriver kDriver{"test-driver", &refuse_all, {{"knob", "1", "a knob"}}};
  static const Status first = register_device_driver(&kDriver);
  ASSERT_TRUE(first) << first.message();
  EXPECT_TRUE(listed(device_drivers(), "test-driver"));
  ASSERT_EQ(device_params("test-driver").size(), 1u);
  EXPECT_EQ(device_params("test-driver")[0].name, "knob");
  auto dev = create_device("test-driver", {{"knob", "2"}, {"attr:queue/nomerges", "1"}});
  ASSERT_FALSE(dev);
  EXPECT_EQ(dev.status().code(), ENODEV);
  EXPECT_EQ(dev.status().message(), "test-driver: made with 1 parameters") << "attr: entries are the core's";
  const Status again = register_device_driver(&kDriver);
  EXPECT_EQ(again.code(), EEXIST);
  EXPECT_EQ(again.message(), "driver 'test-driver' is already registered");
}

TEST(DeviceRegistry, TakenAndEmptyNamesAreRefused) {
  static const DeviceDriver kNull{"null", &refuse_all, {}};
  const Status st = register_device_driver(&kNull);
  EXPECT_EQ(st.code(), EEXIST);
  EXPECT_EQ(st.message(), "driver 'null' is already registered");
  static const DeviceDriver kNameless{"", &refuse_all, {}};
  EXPECT_EQ(register_device_driver(&kNameless).code(), EINVAL);
  static const DeviceDriver kNoFactory{"no-factory", nullptr, {}};
  EXPECT_EQ(register_device_driver(&kNoFactory).code(), EINVAL);
  EXPECT_FALSE(listed(device_drivers(), "no-factory"));
}

TEST(DeviceRegistry, ATakenSchedulerNameIsRefusedTheSameWay) {
  static ElevatorType kyber_again;
  kyber_again.name = "kyber";
  kyber_again.ops.init_sched = [](Queue*, ElevatorQueue*) { return Status::OK(); };
  kyber_again.ops.exit_sched = [](ElevatorQueue*) {};
  kyber_again.ops.insert_requests = [](HwCtx*, ListNode*, uint32_t) {};
  kyber_again.ops.dispatch_request = [](HwCtx*) -> Request* { return nullptr; };
  kyber_again.ops.has_work = [](HwCtx*) { return false; };
  const Status st = register_elevator(&kyber_again);
  EXPECT_EQ(st.code(), EEXIST);
  EXPECT_EQ(st.message(), "elevator 'kyber' is already registered");
}

}  // namespace
}  // namespace blkmq

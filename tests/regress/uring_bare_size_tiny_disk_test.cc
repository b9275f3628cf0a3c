// Regression (issue 27): `blkmq nbd --driver=uring --filename=F --size=1024`
// created a 1 KiB file and served it as a 2-sector disk. A bare size is
// bytes for uring (fio's rule) but MiB for null (null_blk's), and nothing
// said which. Now no driver makes a device under 1 MiB, the error states
// what a bare number counts, and nothing is created.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "blkmq/device.h"
#include "support/device_test_util.h"

namespace blkmq {
namespace {

TEST(UringBareSizeTinyDisk, IsRefusedSayingABareNumberIsBytes) {
  devtest::TempDir dir;
  const std::string f = dir.file("disk");
  auto dev = create_device("uring", {{"filename", f}, {"size", "1024"}});
  ASSERT_FALSE(dev.ok()) << "a 1 KiB disk was made";
  const std::string& e = dev.status().message();
  EXPECT_NE(e.find("uring: parameter 'size': '1024' is out of range"), std::string::npos) << e;
  EXPECT_NE(e.find("a number of bytes"), std::string::npos) << e;
  EXPECT_NE(e.find("at least 1 MiB"), std::string::npos) << e;
  EXPECT_FALSE(std::filesystem::exists(f)) << "the file was created before the size was refused";
  // What the user meant, spelled out, works.
  auto meant = create_device("uring", {{"filename", f}, {"size", "1024m"}});
  ASSERT_TRUE(meant.ok()) << meant.status().message();
  EXPECT_EQ((*meant)->size_bytes(), 1ull << 30);
}

// The same floor for every driver whose bare sizes are bytes.
TEST(UringBareSizeTinyDisk, EveryByteSizedCapacityHasTheSameFloor) {
  for (const char* driver : {"scsi", "ublk"}) {
    auto dev = create_device(driver, {{"size", "4096"}});
    ASSERT_FALSE(dev.ok()) << driver;
    EXPECT_NE(dev.status().message().find("at least 1 MiB"), std::string::npos) << dev.status().message();
  }
  // null counts MiB when bare, as null_blk: 1 is its smallest disk.
  auto null_dev = create_device("null", {{"size", "1"}});
  ASSERT_TRUE(null_dev.ok()) << null_dev.status().message();
  EXPECT_EQ((*null_dev)->size_bytes(), 1ull << 20);
}

}  // namespace
}  // namespace blkmq

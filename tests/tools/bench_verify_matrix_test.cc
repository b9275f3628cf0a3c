// Data integrity through every driver that keeps data, with every
// registered scheduler: `blkmq bench --verify=crc32c` writes random blocks
// of 512 B, 4 KiB, 64 KiB and 1 MiB (one job each, in its own region, all
// at once), then reads every block back and checks it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "blkmq/elevator/elevator.h"
#include "support/bench_run.h"

namespace bench {
namespace {

std::string temp_file(const std::string& stem) {
  return ::testing::TempDir() + "blkmq_verify_" + std::to_string(getpid()) + "_" + stem;
}

bool direct_io_works(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_DIRECT, 0600);
  if (fd < 0) return false;
  ::close(fd);
  ::unlink(path.c_str());
  return true;
}

struct DriverCase {
  const char* name;
  std::vector<std::string> args;  // device options; "@FILE" is replaced by a temp file
};

std::vector<std::string> schedulers() {
  std::vector<std::string> s = {"none"};
  for (const std::string& n : blkmq::registered_elevators()) s.push_back(n);
  return s;
}

class BenchVerify : public ::testing::TestWithParam<std::string> {};

TEST_P(BenchVerify, EveryDriverEveryScheduler) {
  const std::vector<DriverCase> drivers = {
      {"null", {"--driver=null", "--memory_backed=1", "--null.size=64"}},
      {"uring buffered", {"--driver=uring", "--filename=@FILE", "--uring.size=64m"}},
      {"uring O_DIRECT", {"--driver=uring", "--filename=@FILE", "--uring.size=64m", "--direct=1"}},
      // The job buffers registered with the rings: READ_FIXED/WRITE_FIXED.
      {"uring O_DIRECT fixedbufs",
       {"--driver=uring", "--filename=@FILE", "--uring.size=64m", "--direct=1", "--fixedbufs=1"}},
      {"ublk loop", {"--driver=ublk", "--target=loop", "--filename=@FILE", "--ublk.size=64m"}},
      {"scsi memory", {"--driver=scsi", "--backing=memory", "--scsi.size=64m", "--queue_depth=8"}},
  };
  const std::vector<std::string> jobs = {
      "--rw=randwrite", "--verify=crc32c", "--iodepth=8", "--iodepth_batch_submit=4",
      "--name=b512", "--bs=512", "--size=256k",
      "--name=b4k", "--bs=4k", "--offset=1m", "--size=1m",
      "--name=b64k", "--bs=64k", "--offset=4m", "--size=4m",
      "--name=b1m", "--bs=1m", "--offset=16m", "--size=8m",
  };
  const std::string file = temp_file(GetParam());
  for (const DriverCase& d : drivers) {
    if (std::string(d.name).starts_with("uring O_DIRECT") && !direct_io_works(file + ".probe")) {
      std::printf("O_DIRECT is not supported under %s: skipping that case\n", ::testing::TempDir().c_str());
      continue;
    }
    // ublk's loop target serves an existing file; uring would create it.
    int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, 64 << 20), 0);
    ::close(fd);
    std::vector<std::string> args;
    for (const std::string& a : d.args) args.push_back(a == "--filename=@FILE" ? "--filename=" + file : a);
    args.push_back("--scheduler=" + GetParam());
    args.insert(args.end(), jobs.begin(), jobs.end());
    EXPECT_EQ(run_bench(args), 0) << d.name << " with " << GetParam();
    ::unlink(file.c_str());
  }
}

INSTANTIATE_TEST_SUITE_P(Schedulers, BenchVerify, ::testing::ValuesIn(schedulers()),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace bench

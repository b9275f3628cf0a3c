// Regression: `blkmq bench` laid out a missing job file with
// posix_fallocate alone, so a read job on it read unwritten extents: the
// file system answered with zeros and no read reached the disk (426k IOPS
// where fio, which writes the file first, measured 30k). Fixed: as fio, a
// file laid out for a job that reads is written in full (and fsynced);
// write-only jobs still just allocate it, as fio does.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "bench/layout.h"
#include "bench/options.h"
#include "support/bench_run.h"
#include "support/fiemap.h"

namespace bench {
namespace {

using blkmq::test::allocated_bytes;
using blkmq::test::FileExtent;
using blkmq::test::file_extents;
using blkmq::test::unwritten_bytes;

constexpr uint64_t kSize = 8 << 20;

std::string fresh_path(const std::string& stem) {
  const std::string f = temp_path("blkmq_layout", stem);
  std::remove(f.c_str());
  return f;
}

// The extent map of a laid-out file, or a skip where the file system has
// no FIEMAP. Returns false (the caller returns) when the test cannot go on.
bool extents_of(const std::string& f, std::vector<FileExtent>* ext) {
  const int err = file_extents(f, ext);
  if (err == EOPNOTSUPP) return false;
  EXPECT_EQ(err, 0) << f << ": " << strerror(err);
  return err == 0;
}

// The first and last bytes hold the job buffers' fill: the file was written.
void expect_filled(const std::string& f) {
  const int fd = open(f.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  unsigned char first = 0, last = 0;
  EXPECT_EQ(pread(fd, &first, 1, 0), 1);
  EXPECT_EQ(pread(fd, &last, 1, kSize - 1), 1);
  close(fd);
  EXPECT_EQ(first, kBufferFill);
  EXPECT_EQ(last, kBufferFill);
}

TEST(RegressBenchLayoutUnwritten, ReadJobsFileIsWrittenNotUnwrittenExtents) {
  const std::string f = fresh_path("randread.img");
  ASSERT_EQ(run_bench({"--driver=uring", "--filename=" + f, "--size=8m", "--rw=randread", "--bs=64k",
                       "--name=x"}),
            0);
  std::vector<FileExtent> ext;
  if (!extents_of(f, &ext)) {
    std::remove(f.c_str());
    GTEST_SKIP() << "no FIEMAP on the file system of " << f;
  }
  EXPECT_EQ(allocated_bytes(ext, 0, kSize), kSize) << "not fully allocated";
  EXPECT_EQ(unwritten_bytes(ext, 0, kSize), 0u) << "reads would hit unwritten extents (zeros, no disk)";
  expect_filled(f);
  std::remove(f.c_str());
}

BenchConfig config(const std::string& f, std::vector<RwMode> modes) {
  BenchConfig cfg;
  cfg.driver = "uring";
  cfg.device_params["filename"] = f;
  for (RwMode m : modes) {
    JobSpec j;
    j.name = std::string("j_") + rw_name(m);
    j.rw = m;
    j.size = kSize;
    cfg.jobs.push_back(j);
  }
  return cfg;
}

// Lays out f for `modes`; the stderr it printed.
std::string lay_out(const std::string& f, std::vector<RwMode> modes) {
  testing::internal::CaptureStderr();
  const blkmq::Status st = lay_out_missing_file(config(f, modes));
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(st.ok()) << st.message();
  return err;
}

// A read job beside a write-only one still needs the data on disk; the
// message is fio's, naming the first job.
TEST(RegressBenchLayoutUnwritten, AnyReadingJobGetsTheFileWritten) {
  const std::string f = fresh_path("mixed.img");
  const std::string err = lay_out(f, {RwMode::randwrite, RwMode::randrw});
  EXPECT_NE(err.find("j_randwrite: Laying out IO file (1 file / 8MiB)"), std::string::npos) << err;
  std::vector<FileExtent> ext;
  if (extents_of(f, &ext)) {
    EXPECT_EQ(allocated_bytes(ext, 0, kSize), kSize);
    EXPECT_EQ(unwritten_bytes(ext, 0, kSize), 0u);
  }
  expect_filled(f);
  std::remove(f.c_str());
}

// Write-only jobs: allocated at full size, not written (fio does the same;
// the jobs overwrite it).
TEST(RegressBenchLayoutUnwritten, WriteOnlyJobsFileIsAllocatedOnly) {
  const std::string f = fresh_path("write.img");
  const std::string err = lay_out(f, {RwMode::write});
  EXPECT_NE(err.find("Laying out IO file"), std::string::npos) << err;
  std::vector<FileExtent> ext;
  if (extents_of(f, &ext)) {
    EXPECT_EQ(allocated_bytes(ext, 0, kSize), kSize);
  }
  const int fd = open(f.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(lseek(fd, 0, SEEK_END), static_cast<off_t>(kSize));
  unsigned char b = 1;
  EXPECT_EQ(pread(fd, &b, 1, 0), 1);
  EXPECT_EQ(b, 0) << "a write-only job's file was written";
  close(fd);
  std::remove(f.c_str());
}

}  // namespace
}  // namespace bench

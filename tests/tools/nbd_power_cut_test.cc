// A power cut of `blkmq nbd`'s null device while a client is connected,
// through the control socket (`blkmq attr ... device/power_cut=1`): what
// the client flushed or wrote with NBD_CMD_FLAG_FUA survives, what it
// only wrote is gone, per whole 4 KiB page; a TRIM with FUA stays done.
// The client (nbdsh) cuts from inside its own connection, so no disconnect
// can flush first. fio's nbd engine verifies flushed blocks across a cut.
// And on a file (uring, ublk loop), SIGKILL of the server: what was flushed or written
// with FUA is in the file after it.
#include <gtest/gtest.h>
#include <signal.h>

#include <string>
#include <vector>

#include "support/cli_process.h"

namespace blkmq::test {
namespace {

void cut_over_nbd(const std::string& fua) {
  SCOPED_TRACE("fua=" + fua);
  const std::string ctl = temp_socket("ctl_cut");
  CliServer srv({"--driver=null", "--memory_backed=1", "--size=64", "--cache_size=16", "--fua=" + fua,
                 "--discard=1", "--control=" + ctl});
  ASSERT_TRUE(srv.up());
  ASSERT_TRUE(wait_for_path(ctl));
  const std::string attr = std::string(BLKMQ_CLI_PATH) + " attr --control " + ctl + " nullb0 ";
  // 8 KiB of 0x33 flushed and its first page trimmed with FUA; 64 KiB of
  // 0xa5 flushed; 4 KiB of 0x5a with FUA; then, unflushed, a page over the
  // flushed data and a page of its own: both are lost, the trim is not.
  const std::string code =
      "import subprocess\n"
      "h.pwrite(b\"\\x33\" * 8192, 196608); h.flush(); h.trim(4096, 196608, nbd.CMD_FLAG_FUA)\n"
      "h.pwrite(b\"\\xa5\" * 65536, 0); h.flush()\n"
      "h.pwrite(b\"\\x5a\" * 4096, 65536, nbd.CMD_FLAG_FUA)\n"
      "h.pwrite(b\"\\x11\" * 4096, 8192); h.pwrite(b\"\\x22\" * 4096, 131072)\n"
      "assert h.pread(4096, 8192) == b\"\\x11\" * 4096\n"
      "subprocess.run(\"" + attr + "device/power_cut=1\", shell=True, check=True)\n"
      "assert h.pread(65536, 0) == b\"\\xa5\" * 65536, \"flushed data lost\"\n"
      "assert h.pread(4096, 65536) == b\"\\x5a\" * 4096, \"FUA write lost\"\n"
      "assert h.pread(4096, 131072) == bytes(4096), \"unflushed write survived\"\n"
      "assert h.pread(8192, 196608) == bytes(4096) + b\"\\x33\" * 4096, \"TRIM with FUA undone by the cut\"\n";
  const Shell r = sh("PATH=/usr/bin:$PATH nbdsh -u '" + srv.uri() + "' -c '" + code + "'");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(sh(attr + "device/power_cut", 30).output, "1\n");
  EXPECT_EQ(srv.stop(SIGTERM), 0);
}

TEST(NbdPowerCut, FlushedAndFuaWritesSurviveACutThroughTheControlSocket) {
  if (!nbdsh_works()) GTEST_SKIP() << "nbdsh (python3-libnbd) is not installed";
  cut_over_nbd("1");
  cut_over_nbd("0");
}

// fio's nbd engine across a cut: random-sized writes with crc32c headers
// over 8 MiB, ended by a flush (end_fsync); then, unflushed, a 0x5a pattern
// over the first 4 MiB (within the 16 MiB cache, so none of it is written
// back early). Before the cut fio reads the pattern back; after it, every
// block of the flushed job verifies again (the later writes were lost
// whole: no byte of the pattern is left in any block) and the pattern does
// not. Each fio run is its own connection; the server does not flush when
// a client leaves, so the cut still finds the pattern only in the cache.
// Without end_fsync the first check after the cut fails (tried).
TEST(NbdPowerCut, FioVerifiesFlushedBlocksAfterACutAndTheUnflushedOnesAreGone) {
  if (!fio_has_nbd()) GTEST_SKIP() << "fio with the nbd engine is not installed";
  const std::string ctl = temp_socket("ctl_fio_cut");
  CliServer srv({"--driver=null", "--memory_backed=1", "--size=64", "--cache_size=16", "--control=" + ctl});
  ASSERT_TRUE(srv.up());
  ASSERT_TRUE(wait_for_path(ctl));
  const std::string fio = "fio --ioengine=nbd --uri='" + srv.uri() + "' --iodepth=8 --verify_state_save=0"
                          " --verify_fatal=1 --offset=0 ";
  const std::string flushed = fio + "--name=flushed --rw=randwrite --bsrange=512-64k --size=8m --verify=crc32c";
  const std::string pattern = fio + "--name=later --rw=write --bs=4k --size=4m --verify=pattern"
                                    " --verify_pattern=0x5a";
  Shell r = sh(flushed + " --do_verify=0 --end_fsync=1", 120);
  ASSERT_EQ(r.status, 0) << r.output;
  r = sh(pattern + " --do_verify=0", 120);
  ASSERT_EQ(r.status, 0) << r.output;
  r = sh(pattern + " --verify_only", 120);
  ASSERT_EQ(r.status, 0) << "the unflushed pattern is not there before the cut\n" << r.output;
  r = sh(std::string(BLKMQ_CLI_PATH) + " attr --control " + ctl + " nullb0 device/power_cut=1", 30);
  ASSERT_EQ(r.status, 0) << r.output;
  r = sh(flushed + " --verify_only", 120);
  EXPECT_EQ(r.status, 0) << "flushed blocks do not verify after the cut\n" << r.output;
  EXPECT_EQ(r.output.find("verify failed"), std::string::npos) << r.output;
  r = sh(pattern + " --verify_only", 120);
  EXPECT_NE(r.status, 0) << "unflushed writes survived the cut\n" << r.output;
  EXPECT_EQ(srv.stop(SIGTERM), 0);
}

// A driver over a file (uring; ublk's loop target), the server SIGKILLed
// after the client's writes. A process kill loses no page cache and this
// machine cannot drop dirty pages (drop_caches writes them back first), so
// this is not a power cut: it checks that what was acknowledged after a
// FLUSH, with FUA, or as a FUA WRITE_ZEROES, is in the file once the server
// is gone, read past the page cache (O_DIRECT after drop_caches, where
// allowed).
void flushed_writes_survive_sigkill(const std::vector<std::string>& driver) {
  const std::string file = testing::TempDir() + "blkmq_kill_" + std::to_string(getpid()) + ".img";
  std::remove(file.c_str());
  ASSERT_EQ(sh("truncate -s 8m " + file, 10).status, 0);  // ublk loop takes an existing file
  std::vector<std::string> args = driver;
  args.push_back("--filename=" + file);
  args.push_back("--size=8m");
  CliServer srv(args);
  ASSERT_TRUE(srv.up());
  const std::string code =
      "h.pwrite(b\"\\xa5\" * 65536, 0); h.flush()\n"
      "h.pwrite(b\"\\x5a\" * 4096, 65536, nbd.CMD_FLAG_FUA)\n"
      "h.zero(4096, 4096, nbd.CMD_FLAG_FUA)\n";
  const Shell r = sh("PATH=/usr/bin:$PATH nbdsh -u '" + srv.uri() + "' -c '" + code + "'");
  ASSERT_EQ(r.status, 0) << r.output;
  srv.stop(SIGKILL);
  sh("sync -f " + file + " 2>/dev/null; echo 1 > /proc/sys/vm/drop_caches 2>/dev/null", 30);
  const Shell d = sh("dd if=" + file + " bs=4096 count=17 iflag=direct 2>/dev/null | od -An -tx1 -v | tr -s ' \\n' ' '", 30);
  std::string want;
  for (int i = 0; i < 17 * 4096; i++) {
    const bool zero = i >= 4096 && i < 8192;
    want += std::string(" ") + (zero ? "00" : i < 65536 ? "a5" : "5a");
  }
  EXPECT_EQ(d.output, want + " ") << "the file after SIGKILL does not hold the acknowledged writes";
  std::remove(file.c_str());
}

TEST(NbdPowerCut, FlushedAndFuaWritesToAFileAreThereAfterSigkill) {
  if (!nbdsh_works()) GTEST_SKIP() << "nbdsh (python3-libnbd) is not installed";
  flushed_writes_survive_sigkill({"--driver=uring"});
}

TEST(NbdPowerCut, FlushedAndFuaWritesThroughUblkLoopAreThereAfterSigkill) {
  if (!nbdsh_works()) GTEST_SKIP() << "nbdsh (python3-libnbd) is not installed";
  flushed_writes_survive_sigkill({"--driver=ublk", "--target=loop"});
}

}  // namespace
}  // namespace blkmq::test

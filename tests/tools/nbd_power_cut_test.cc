// A power cut of `blkmq nbd`'s null device while a client is connected,
// through the control socket (`blkmq attr ... device/power_cut=1`): what
// the client flushed or wrote with NBD_CMD_FLAG_FUA survives, what it
// only wrote is gone, per whole 4 KiB page. The client (nbdsh) cuts from
// inside its own connection, so no disconnect can flush first.
#include <gtest/gtest.h>
#include <signal.h>

#include <string>

#include "support/cli_process.h"

namespace blkmq::test {
namespace {

bool nbdsh_works() { return sh("PATH=/usr/bin:$PATH nbdsh -c pass", 20).status == 0; }

void cut_over_nbd(const std::string& fua) {
  SCOPED_TRACE("fua=" + fua);
  const std::string ctl = temp_socket("ctl_cut");
  CliServer srv({"--driver=null", "--memory_backed=1", "--size=64", "--cache_size=16", "--fua=" + fua,
                 "--control=" + ctl});
  ASSERT_TRUE(srv.up());
  ASSERT_TRUE(wait_for_path(ctl));
  const std::string attr = std::string(BLKMQ_CLI_PATH) + " attr --control " + ctl + " nullb0 ";
  // 64 KiB of 0xa5 flushed; 4 KiB of 0x5a with FUA; then, unflushed, a
  // page over the flushed data and a page of its own: both are lost.
  const std::string code =
      "import subprocess\n"
      "h.pwrite(b\"\\xa5\" * 65536, 0); h.flush()\n"
      "h.pwrite(b\"\\x5a\" * 4096, 65536, nbd.CMD_FLAG_FUA)\n"
      "h.pwrite(b\"\\x11\" * 4096, 8192); h.pwrite(b\"\\x22\" * 4096, 131072)\n"
      "assert h.pread(4096, 8192) == b\"\\x11\" * 4096\n"
      "subprocess.run(\"" + attr + "device/power_cut=1\", shell=True, check=True)\n"
      "assert h.pread(65536, 0) == b\"\\xa5\" * 65536, \"flushed data lost\"\n"
      "assert h.pread(4096, 65536) == b\"\\x5a\" * 4096, \"FUA write lost\"\n"
      "assert h.pread(4096, 131072) == bytes(4096), \"unflushed write survived\"\n";
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

}  // namespace
}  // namespace blkmq::test

// `blkmq nbd` as a process: SIGTERM stops it cleanly (exit 0, socket
// removed), --run returns the command's status, and the TLS options that
// do not fit together are refused with a clear error.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "support/blkparse.h"
#include "support/cli_process.h"

namespace blkmq::test {
namespace {

// Regression: SIGTERM was left open in the device's threads (started before
// the mask), so it killed the process (exit 143) and left the socket behind.
TEST(NbdCli, SigtermStopsCleanly) {
  CliServer s({"--driver=null", "--memory_backed=1", "--size=16"});
  ASSERT_TRUE(s.up()) << "the server never listened";
  EXPECT_EQ(s.stop(SIGTERM), 0);
  EXPECT_NE(access(s.socket().c_str(), F_OK), 0) << "the socket was left behind";
}

TEST(NbdCli, RunReturnsTheCommandsStatus) {
  const std::string sock = temp_socket("nbd_run");
  const pid_t pid = spawn_cli({"nbd", "--driver=null", "--size=16", "--socket=" + sock, "--run",
                               "test -S \"$unixsocket\" && case \"$uri\" in nbd+unix:*) exit 7;; esac"});
  ASSERT_GT(pid, 0);
  EXPECT_EQ(wait_exit(pid), 7);
}

// --blktrace: the served device's events, from a real client's reads and
// writes, in the files blkparse reads once the server is gone.
TEST(NbdCli, BlktraceRecordsTheClientsIo) {
  if (!have_blktrace_tools() || std::system("command -v qemu-io >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "blktrace or qemu-io not installed";
  const std::string sock = temp_socket("nbd_trace");
  const std::string dir = testing::TempDir() + "blkmq_nbd_trace_" + std::to_string(getpid());
  const pid_t pid = spawn_cli({"nbd", "--driver=null", "--memory_backed=1", "--size=16", "--socket=" + sock,
                               "--blktrace=" + dir, "--run",
                               "qemu-io -f raw -c 'write 64k 8k' -c 'read 0 4k' \"$uri\""});
  ASSERT_GT(pid, 0);
  ASSERT_EQ(wait_exit(pid), 0);
  const auto lines = blkparse(dir + "/nullb0");
  const auto q = events(lines, "Q");
  ASSERT_GE(q.size(), 2u) << "the client's write and read";
  bool write = false, read = false;
  for (const auto& l : q) {
    write |= l[6].find('W') != std::string::npos && l[7] == "128" && l[9] == "16";
    read |= l[6] == "R" && l[7] == "0" && l[9] == "8";
  }
  EXPECT_TRUE(write && read);
  // qemu-io's closing flush completes without reaching null (no volatile
  // cache), as the kernel completes it: Q G C and no D.
  EXPECT_EQ(events(lines, "C").size(), q.size());
}

// Runs `blkmq nbd ARGS` (shell words); its exit status, *out its output.
int run_cli(const std::string& args, std::string* out) {
  Shell r = sh(std::string(BLKMQ_CLI_PATH) + " nbd " + args, 30);
  *out = std::move(r.output);
  return r.status;
}

TEST(NbdCli, BadTlsOptionsAreRefused) {
  const std::string sock = "--socket=" + testing::TempDir() + "blkmq_nbd_tls_" + std::to_string(getpid()) + ".sock ";
  const struct {
    std::string args, says;
  } cases[] = {
      {"--tls=maybe", "--tls: 'maybe' is not accepted; expected off, on or require"},
      {"--tls=require", "needs --tls-certificates=DIR or --tls-psk=FILE"},
      {"--tls=on --tls-certificates=/x --tls-psk=/y", "exclude each other"},
      {"--tls-certificates=/x", "need --tls=on or --tls=require"},
      {"--tls=require --tls-psk=/y --tls-verify-peer", "not --tls-psk"},
      {"--tls=require --tls-certificates=/nonexistent", "/nonexistent/server-cert.pem"},
  };
  for (const auto& c : cases) {
    std::string err;
    EXPECT_EQ(run_cli(sock + "--driver=null --size=16 " + c.args, &err), 1) << c.args;
    EXPECT_NE(err.find(c.says), std::string::npos) << c.args << ": " << err;
  }
}

// --run sets nbdkit's captive-mode variables for the first export, and
// $uri names that export (issue 27: only $uri and $unixsocket were set, and
// $uri and the banner always named the default export, so with --name or
// --alias the printed URI reached another one or none).
TEST(NbdCli, RunSetsTheCaptiveVariablesOfTheFirstExport) {
  const std::string sock = temp_socket("nbd_vars");
  std::string err;
  const int rc = run_cli("--socket=" + sock + " --name 'my disk' --driver=null --size=16 --run '"
                         "test \"$exportname\" = \"my disk\" || exit 2; "
                         "test \"$uri\" = \"nbd+unix:///my%20disk?socket=$unixsocket\" || exit 3; "
                         "test \"$nbd\" = \"nbd:unix:$unixsocket:exportname=my disk\" || exit 4; "
                         "test -z \"$port\" -a \"$tls\" = 0 || exit 5; "
                         "command -v nbdinfo >/dev/null || exit 0; nbdinfo --size \"$uri\" | grep -qx 16777216 || exit 6'",
                         &err);
  EXPECT_EQ(rc, 0) << err;
  EXPECT_NE(err.find("serving 'my disk' (null, 16777216 bytes, weight 100) at nbd+unix:///my%20disk?socket="),
            std::string::npos) << err;
  // Over TCP: $port is the port, $unixsocket empty, $nbd the host form.
  EXPECT_EQ(run_cli("--port=0 --driver=null --size=16 --run '"
                    "test -n \"$port\" -a -z \"$unixsocket\" -a -z \"$exportname\" || exit 2; "
                    "test \"$nbd\" = \"nbd:127.0.0.1:$port\" || exit 3; "
                    "test \"$uri\" = \"nbd://127.0.0.1:$port/\" || exit 4'", &err),
            0) << err;
}

// An error says what is wrong and where the usage is, without the usage
// itself under it (issue 27).
TEST(NbdCli, AnErrorIsOneLineAndAPointerToHelp) {
  std::string err;
  EXPECT_EQ(run_cli("--driver=null --size=16 --connections=0", &err), 1);
  EXPECT_EQ(err,
            "blkmq nbd: --connections: '0' is out of range; expected an integer from 1 to 4096\n"
            "see blkmq nbd --help\n");
}

// Sizes and times take fio's units; a bare number's unit is the one the
// error states (issue 27: --driver=uring --size=1024 served a 1 KiB file).
TEST(NbdCli, SizesAndTimesTakeUnitsAndSayWhatABareNumberIs) {
  std::string err;
  EXPECT_EQ(run_cli("--driver=null --size=16m --port=0 --max-inflight 1g --idle-timeout 500ms --run true", &err), 0)
      << err;
  EXPECT_EQ(run_cli("--driver=null --size=16 --port=0 --max-inflight 8 --run true", &err), 1);
  EXPECT_NE(err.find("--max-inflight: '8' is out of range; expected a number of MiB (1024 is 1 GiB)"),
            std::string::npos) << err;
  EXPECT_EQ(run_cli("--driver=null --size=16 --port=0 --idle-timeout 2x --run true", &err), 1);
  EXPECT_NE(err.find("--idle-timeout: '2x' is not a time; expected a number of seconds"), std::string::npos) << err;
  const std::string file = testing::TempDir() + "blkmq_nbd_tiny_" + std::to_string(getpid()) + ".img";
  EXPECT_EQ(run_cli("--driver=uring --filename=" + file + " --size=1024 --port=0 --run true", &err), 1);
  EXPECT_NE(err.find("uring: parameter 'size': '1024' is out of range; expected a number of bytes"),
            std::string::npos) << err;
  EXPECT_NE(access(file.c_str(), F_OK), 0) << "a 1 KiB file was created";
}

TEST(NbdCli, PlaintextTcpOffLoopbackWarns) {
  std::string err;
  EXPECT_EQ(run_cli("--driver=null --size=16 --port=0 --bind=0.0.0.0 --run true", &err), 0);
  EXPECT_NE(err.find("warning: serving 0.0.0.0 without TLS"), std::string::npos) << err;
  EXPECT_EQ(run_cli("--driver=null --size=16 --port=0 --run true", &err), 0);  // loopback: no warning
  EXPECT_EQ(err.find("warning"), std::string::npos) << err;
}

TEST(NbdCli, TlsOnWithVerifyPeerWarnsThatPlaintextGetsIn) {
  std::string err;
  // The warning comes at start, before the credentials load (which fails here).
  run_cli("--driver=null --size=16 --port=0 --tls=on --tls-certificates=/nonexistent --tls-verify-peer --run true",
          &err);
  EXPECT_NE(err.find("warning: --tls=on with --tls-verify-peer still serves plaintext clients"), std::string::npos)
      << err;
  run_cli("--driver=null --size=16 --port=0 --tls=require --tls-certificates=/nonexistent --tls-verify-peer "
          "--run true", &err);
  EXPECT_EQ(err.find("warning"), std::string::npos) << "--tls=require admits no plaintext: " << err;
}

TEST(NbdCli, MemoryBackedNullLargerThanMemoryWarns) {
  const unsigned long long phys_mib =
      static_cast<unsigned long long>(sysconf(_SC_PHYS_PAGES)) * static_cast<unsigned long long>(sysconf(_SC_PAGESIZE)) >> 20;
  std::string err;
  // Pages are allocated as they are written: a device twice the memory
  // costs nothing until then.
  EXPECT_EQ(run_cli("--driver=null --memory_backed=1 --size=" + std::to_string(2 * phys_mib) + " --port=0 --run true",
                    &err), 0) << err;
  EXPECT_NE(err.find("is larger than this machine's memory"), std::string::npos) << err;
  EXPECT_EQ(run_cli("--driver=null --memory_backed=1 --size=16 --port=0 --run true", &err), 0) << err;
  EXPECT_EQ(err.find("warning"), std::string::npos) << err;
  EXPECT_EQ(run_cli("--driver=null --size=" + std::to_string(2 * phys_mib) + " --port=0 --run true", &err), 0) << err;
  EXPECT_EQ(err.find("warning"), std::string::npos) << "not memory-backed: nothing is stored: " << err;
}

// --idle-timeout ends a connection that sits idle with nothing in flight
// (off by default); --max-inflight takes MiB, 32 at least.
TEST(NbdCli, IdleTimeoutEndsAnIdleConnectionOnlyWhenSet) {
  if (std::system("/usr/bin/python3 -c 'import nbd' 2>/dev/null") != 0) GTEST_SKIP() << "python3-libnbd is not installed";
  const std::string script = testing::TempDir() + "blkmq_idle_" + std::to_string(getpid()) + ".py";
  // The client idles 1.5 s against a 1 s idle timeout: real time is the point.
  std::ofstream(script) << "import nbd, os, time\nh = nbd.NBD()\nh.connect_uri(os.environ['uri'])\nh.pread(512, 0)\n"
                           "time.sleep(1.5)\ntry:\n    h.pread(512, 0)\n    print('still connected')\n"
                           "except Exception:\n    print('ended')\n";
  std::string out;
  EXPECT_EQ(run_cli("--driver=null --size=16 --port=0 --idle-timeout 1 --max-inflight 64 --run '/usr/bin/python3 " +
                        script + "'", &out), 0) << out;
  EXPECT_NE(out.find("ended"), std::string::npos) << out;
  EXPECT_NE(out.find("connection ended: idle timeout"), std::string::npos) << out;
  EXPECT_EQ(run_cli("--driver=null --size=16 --port=0 --run '/usr/bin/python3 " + script + "'", &out), 0) << out;
  EXPECT_NE(out.find("still connected"), std::string::npos) << out;
  EXPECT_EQ(run_cli("--driver=null --size=16 --port=0 --max-inflight 8 --run true", &out), 1) << "under 32 MiB";
  std::remove(script.c_str());
}

}  // namespace
}  // namespace blkmq::test

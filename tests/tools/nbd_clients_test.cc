// `blkmq nbd` against the NBD clients people really use: qemu-io (patterns,
// zeroes, discard, FUA, async writes), qemu-img convert, qemu-nbd --list and
// nbdinfo --list, fio's nbd engine with verification over 1 and 4
// connections, a SIGKILL between a flushed write and its read-back on the
// uring driver, and a server that outlives malformed clients. Each client
// runs under a time limit and the test is skipped where it is not installed.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "support/nbd_test_util.h"
#include "nbd/protocol.h"
#include "support/cli_process.h"

namespace blkmq::test {
namespace {

namespace nbdt = blkmq::nbd::test;  // the codec tests' option builders

const std::string kName = "blkmq";
const std::string kDescription = "blkmq clients test export";

// A 64 MiB memory-backed null device that supports discard (TRIM).
std::vector<std::string> null_export(unsigned size_mib = 64) {
  return {"--driver=null", "--memory_backed=1", "--discard=1", "--size=" + std::to_string(size_mib),
          "--name=" + kName, "--description=" + kDescription};
}

// qemu-io on the export, one -c per command, all in one process (and one
// connection), so later commands see what earlier ones wrote.
Shell qemu_io(const CliServer& s, const std::vector<std::string>& cmds) {
  std::string c = "qemu-io -f raw '" + s.uri(kName) + "'";
  for (const std::string& cmd : cmds) c += " -c '" + cmd + "'";
  return sh(c);
}

// qemu-io reports a failed command or a -P mismatch in its output; older
// versions still exit 0 then, so the output is checked too.
void expect_clean(const Shell& r) {
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.find("Pattern verification failed"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("failed"), std::string::npos) << r.output;
}

std::string temp_dir(const std::string& tag) {
  std::string t = testing::TempDir() + "blkmq_" + tag + "_" + std::to_string(getpid()) + "_XXXXXX";
  EXPECT_NE(mkdtemp(t.data()), nullptr);
  return t;
}

TEST(NbdClients, QemuIoPatternsZeroesDiscardFuaAndAsyncWrites) {
  if (!have("qemu-io")) GTEST_SKIP() << "qemu-io (qemu-utils) is not installed";
  CliServer s(null_export());
  ASSERT_TRUE(s.up());
  expect_clean(qemu_io(s, {
      "write -P 0xab 0 64k", "read -P 0xab 0 64k",
      // Unaligned to the 512-byte block: qemu reads, modifies and writes.
      "write -P 0xcd 1000 3000", "read -P 0xcd 1000 3000", "read -P 0xab 0 1000", "read -P 0xab 4000 61536",
      "write -z 64k 64k", "read -P 0 64k 64k",
      "write -P 0x11 128k 64k", "discard 128k 64k", "read -P 0 128k 64k",
      "write -f -P 0x22 256k 4k", "read -P 0x22 256k 4k",
      "aio_write -P 0x33 512k 64k", "aio_write -P 0x44 576k 64k", "aio_write -P 0x55 1m 1m", "aio_flush",
      "read -P 0x33 512k 64k", "read -P 0x44 576k 64k", "read -P 0x55 1m 1m", "flush",
  }));
  // A second connection sees the first one's data (one shared device).
  expect_clean(qemu_io(s, {"read -P 0xab 0 1000", "read -P 0xcd 1000 3000", "read -P 0x55 1m 1m"}));
}

std::string random_file(const std::string& path, size_t bytes) {
  std::string data(bytes, '\0');
  std::mt19937_64 rng(42);
  for (size_t i = 0; i < bytes; i += 8) {
    const uint64_t v = rng();
    std::memcpy(data.data() + i, &v, std::min<size_t>(8, bytes - i));
  }
  std::ofstream(path, std::ios::binary).write(data.data(), static_cast<std::streamsize>(data.size()));
  return data;
}

TEST(NbdClients, QemuImgConvertToTheExportAndBack) {
  if (!have("qemu-img")) GTEST_SKIP() << "qemu-img (qemu-utils) is not installed";
  const std::string dir = temp_dir("convert");
  random_file(dir + "/in.raw", 16 << 20);
  CliServer s(null_export(16));
  ASSERT_TRUE(s.up());
  const std::string uri = "'" + s.uri(kName) + "'";
  Shell r = sh("qemu-img convert -n -f raw -O raw " + dir + "/in.raw " + uri);
  ASSERT_EQ(r.status, 0) << r.output;
  r = sh("qemu-img convert -f raw -O raw " + uri + " " + dir + "/out.raw");
  ASSERT_EQ(r.status, 0) << r.output;
  r = sh("cmp " + dir + "/in.raw " + dir + "/out.raw");
  EXPECT_EQ(r.status, 0) << r.output;
  sh("rm -rf " + dir);
}

TEST(NbdClients, QemuNbdAndNbdinfoListTheExport) {
  CliServer s(null_export(16));
  ASSERT_TRUE(s.up());
  bool ran = false;
  if (have("qemu-nbd")) {
    ran = true;
    const Shell r = sh("qemu-nbd -L -k " + s.socket());
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("export: '" + kName + "'"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("description: " + kDescription), std::string::npos) << r.output;
  }
  if (have("nbdinfo")) {
    ran = true;
    const Shell r = sh("nbdinfo --list '" + s.uri() + "'");
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("export=\"" + kName + "\""), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(kDescription), std::string::npos) << r.output;
  }
  if (!ran) GTEST_SKIP() << "neither qemu-nbd nor nbdinfo is installed";
}

// fio writes random-sized blocks at random offsets, then reads every one
// back and checks its crc32c. Each job has its own 8 MiB region (jobs that
// overlapped would overwrite each other's verified blocks) and its own
// connection.
void fio_verify(unsigned jobs) {
  CliServer s(null_export(8 * jobs));
  ASSERT_TRUE(s.up());
  // verify_state_save=0: no state files left in the working directory.
  const Shell r = sh("fio --name=verify --ioengine=nbd --uri='" + s.uri(kName) +
                         "' --rw=randwrite --bsrange=512-64k --verify=crc32c --do_verify=1 --verify_fatal=1"
                         " --verify_state_save=0 --iodepth=8 --size=8m --offset_increment=8m"
                         " --group_reporting --numjobs=" + std::to_string(jobs),
                     120);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.find("verify failed"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("bad magic"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("err= 0"), std::string::npos) << r.output;
}

TEST(NbdClients, FioNbdEngineVerifiesOneJob) {
  if (!fio_has_nbd()) GTEST_SKIP() << "fio with the nbd engine is not installed";
  fio_verify(1);
}

TEST(NbdClients, FioNbdEngineVerifiesFourJobs) {
  if (!fio_has_nbd()) GTEST_SKIP() << "fio with the nbd engine is not installed";
  fio_verify(4);
}

std::string read_file(const std::string& path, size_t off, size_t n) {
  std::ifstream f(path, std::ios::binary);
  f.seekg(static_cast<std::streamoff>(off));
  std::string s(n, '\0');
  f.read(s.data(), static_cast<std::streamsize>(n));
  s.resize(static_cast<size_t>(f.gcount()));
  return s;
}

// nbdsh runs whatever python3 is first on PATH; the python3-libnbd module
// belongs to the distribution's, which a pyenv or venv python lacks.
Shell nbdsh(const std::string& uri, const std::string& code) {
  return sh("PATH=/usr/bin:$PATH nbdsh -u '" + uri + "' -c '" + code + "'");
}

// A flushed write and a FUA write survive the server's SIGKILL: the uring
// driver passes them to the file (FLUSH as fdatasync, FUA as RWF_DSYNC) and
// keeps nothing of its own to lose. A SIGKILL cannot test power loss; this
// shows that no acknowledged data lives only in the server.
void survive_sigkill(const std::string& direct) {
  const std::string dir = temp_dir("durable");
  const std::string file = dir + "/disk.img";
  const std::vector<std::string> args = {"--driver=uring", "--filename=" + file, "--size=16m",
                                         "--direct=" + direct, "--name=" + kName};
  {
    CliServer s(args);
    ASSERT_TRUE(s.up());
    const Shell w = nbdsh(s.uri(kName), "h.pwrite(b\"\\xa5\" * 65536, 0); h.flush(); "
                                        "h.pwrite(b\"\\x5a\" * 4096, 65536, nbd.CMD_FLAG_FUA)");
    ASSERT_EQ(w.status, 0) << w.output;
    EXPECT_EQ(s.stop(SIGKILL), 128 + SIGKILL);
  }
  EXPECT_EQ(read_file(file, 0, 65536), std::string(65536, '\xa5'));
  EXPECT_EQ(read_file(file, 65536, 4096), std::string(4096, '\x5a'));
  // The dead server left its socket file; a fresh path keeps up() from
  // seeing that one before the new server listens.
  CliServer again(args);
  ASSERT_TRUE(again.up());
  const Shell r = nbdsh(again.uri(kName), "assert h.pread(65536, 0) == b\"\\xa5\" * 65536; "
                                         "assert h.pread(4096, 65536) == b\"\\x5a\" * 4096");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(again.stop(SIGTERM), 0);
  sh("rm -rf " + dir);
}

TEST(NbdClients, FlushedWritesSurviveSigkillOnUring) {
  if (!nbdsh_works()) GTEST_SKIP() << "nbdsh (python3-libnbd) is not installed";
  survive_sigkill("0");
}

// The same through O_DIRECT, where the page cache is out of the way.
TEST(NbdClients, FlushedWritesSurviveSigkillOnUringDirect) {
  if (!nbdsh_works()) GTEST_SKIP() << "nbdsh (python3-libnbd) is not installed";
  const std::string dir = temp_dir("odirect");
  const int fd = ::open((dir + "/probe").c_str(), O_CREAT | O_RDWR | O_DIRECT, 0644);
  if (fd >= 0) ::close(fd);
  sh("rm -rf " + dir);
  if (fd < 0) GTEST_SKIP() << "the temp dir's file system refuses O_DIRECT";
  survive_sigkill("1");
}

// On uring the export offers WRITE_ZEROES and TRIM for real (fallocate
// ZERO_RANGE and PUNCH_HOLE); null has no WRITE_ZEROES, where qemu writes
// zero buffers instead.
TEST(NbdClients, QemuIoZeroesAndDiscardOnUring) {
  if (!have("qemu-io")) GTEST_SKIP() << "qemu-io (qemu-utils) is not installed";
  const std::string dir = temp_dir("uring_io");
  CliServer s({"--driver=uring", "--filename=" + dir + "/disk.img", "--size=64m", "--name=" + kName});
  ASSERT_TRUE(s.up());
  expect_clean(qemu_io(s, {
      "write -P 0xab 0 8m", "write -z 1m 2m", "read -P 0 1m 2m", "read -P 0xab 0 1m", "read -P 0xab 3m 5m",
      "write -z -u 4m 1m", "read -P 0 4m 1m", "discard 6m 1m", "read -P 0 6m 1m", "read -P 0xab 7m 1m",
      "write -z 0 64m", "read -P 0 0 8m", "flush",
  }));
  EXPECT_EQ(s.stop(SIGTERM), 0);
  sh("rm -rf " + dir);
}

// Just enough of a client to misbehave: raw bytes over the Unix socket.
class RawConn {
 public:
  explicit RawConn(const std::string& path) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
    EXPECT_EQ(::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    timeval tv{10, 0};  // a server that neither answers nor closes fails the test, not hangs it
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    EXPECT_EQ(read_n(18).size(), 18u) << "no greeting";
  }
  ~RawConn() { ::close(fd_); }
  void send(const std::string& s) { EXPECT_EQ(::send(fd_, s.data(), s.size(), MSG_NOSIGNAL), ssize_t(s.size())); }
  std::string read_n(size_t n) {
    std::string s(n, '\0');
    size_t got = 0;
    for (ssize_t k; got < n && ((k = ::read(fd_, s.data() + got, n - got)) > 0 || (k < 0 && errno == EINTR));)
      if (k > 0) got += size_t(k);
    s.resize(got);
    return s;
  }
  // GO on `name`; true at its ACK.
  bool go(const std::string& name) {
    using namespace blkmq::nbd;
    send(nbdt::client_flags(kClientFixedNewstyle | kClientNoZeroes) + nbdt::option(kOptGo, nbdt::go_data(name)));
    for (std::string h; (h = read_n(20)).size() == 20;) {
      const uint32_t type = get32(h.data() + 12);
      read_n(get32(h.data() + 16));
      if (type == kRepAck) return true;
      if (type & kRepErrBit) return false;
    }
    return false;
  }
  // The server closed: a read sees end of file (not the 10 s time-out).
  bool closed_by_server() {
    char c;
    return ::read(fd_, &c, 1) == 0;
  }

 private:
  int fd_ = -1;
};

std::string write_header(uint64_t off, uint32_t len) {
  nbd::Request r;
  r.type = nbd::kCmdWrite;
  r.cookie = 7;
  r.offset = off;
  r.length = len;
  return nbd::encode_request(r);
}

// The server's own tests (tests/nbd/server_io_test.cc) cover the spec's
// errors for well-formed requests; these are clients that break framing.
TEST(NbdClients, ServerOutlivesMalformedClients) {
  CliServer s(null_export(16));
  ASSERT_TRUE(s.up());
  {  // garbage where the client flags and first option belong
    RawConn c(s.socket());
    c.send(nbdt::client_flags(nbd::kClientFixedNewstyle) + std::string(64, '\x5e'));
    EXPECT_TRUE(c.closed_by_server());
  }
  {  // an option that announces 100 bytes and brings 10
    RawConn c(s.socket());
    std::string opt = nbdt::option(nbd::kOptGo, std::string(100, 'x'));
    c.send(nbdt::client_flags(nbd::kClientFixedNewstyle) + opt.substr(0, 26));
  }
  {  // a WRITE whose payload stops a quarter of the way, then a hang-up
    RawConn c(s.socket());
    ASSERT_TRUE(c.go(kName));
    c.send(write_header(0, 64 << 10) + std::string(16 << 10, '\x77'));
  }
  {  // a request header with a bad magic: the stream cannot be resynced
    RawConn c(s.socket());
    ASSERT_TRUE(c.go(kName));
    c.send(std::string(28, '\xee'));
    EXPECT_TRUE(c.closed_by_server());
  }
  ASSERT_TRUE(s.up());
  if (have("nbdinfo")) {
    const Shell r = sh("nbdinfo '" + s.uri(kName) + "'");
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("export-size: 16777216"), std::string::npos) << r.output;
  }
  {  // and it still serves data: the cut-short WRITE changed nothing it acknowledged
    RawConn c(s.socket());
    ASSERT_TRUE(c.go(kName));
    c.send(write_header(0, 512) + std::string(512, '\x42'));
    const std::string h = c.read_n(16);
    ASSERT_EQ(h.size(), 16u);
    EXPECT_EQ(nbd::get32(h.data() + 4), 0u) << "the WRITE after the malformed clients failed";
  }
  EXPECT_EQ(s.stop(SIGTERM), 0) << "the server did not stop cleanly after the malformed clients";
}

}  // namespace
}  // namespace blkmq::test

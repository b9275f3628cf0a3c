// base:allocation end to end: BLOCK_STATUS replies (descriptors, REQ_ONE,
// errors) and OFFSET_HOLE reads seen by a raw structured-reply client,
// FAST_ZERO refused or done per device, and libnbd's nbdinfo --map and
// nbdsh on null (memory-backed) and uring (sparse file) exports.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

#include "blkmq/device.h"
#include "support/nbd_test_util.h"
#include "nbd/server.h"

namespace blkmq::nbd {
namespace {

using test::read_exactly;
using test::Served;

struct Chunk {
  uint16_t flags = 0, type = 0;
  uint64_t cookie = 0;
  std::string payload;
};

// Negotiates structured replies (and base:allocation if asked), then GO.
class Client {
 public:
  Client(const std::string& path, bool structured, bool meta) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
    EXPECT_EQ(::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(read_n(18).size(), 18u);
    std::string opts = test::client_flags(kClientFixedNewstyle | kClientNoZeroes);
    int acks = 1;
    if (structured) opts += test::option(kOptStructuredReply), acks++;
    if (meta) opts += test::option(kOptSetMetaContext, test::meta_data("", {"base:allocation"})), acks++;
    send(opts + test::option(kOptGo, test::go_data("")));
    while (acks > 0) {
      const std::string h = read_n(20);
      if (h.size() != 20) {
        ADD_FAILURE() << "handshake cut short";
        return;
      }
      const uint32_t type = get32(h.data() + 12);
      const std::string data = read_n(get32(h.data() + 16));
      if (type & kRepErrBit) {
        ADD_FAILURE() << "option refused: " << type;
        return;
      }
      if (type == kRepMetaContext) context_ = get32(data.data());
      if (type == kRepAck) acks--;
    }
  }
  ~Client() { ::close(fd_); }
  void send(const std::string& s) { ASSERT_EQ(::write(fd_, s.data(), s.size()), static_cast<ssize_t>(s.size())); }
  void request(uint16_t type, uint64_t cookie, uint64_t off, uint32_t len, uint16_t flags = 0,
               const std::string& payload = {}) {
    Request r;
    r.type = type;
    r.flags = flags;
    r.cookie = cookie;
    r.offset = off;
    r.length = len;
    send(encode_request(r) + payload);
  }
  Chunk chunk() {
    Chunk c;
    const std::string h = read_n(20);
    if (h.size() != 20 || get32(h.data()) != kStructuredReplyMagic) return c;
    c.flags = get16(h.data() + 4);
    c.type = get16(h.data() + 6);
    c.cookie = get64(h.data() + 8);
    c.payload = read_n(get32(h.data() + 16));
    return c;
  }
  uint32_t simple_reply(uint64_t* cookie) {
    const std::string h = read_n(16);
    if (h.size() != 16 || get32(h.data()) != kSimpleReplyMagic) return ~0u;
    *cookie = get64(h.data() + 8);
    return get32(h.data() + 4);
  }
  uint32_t context() const { return context_; }
  std::string read_n(size_t n) { return read_exactly(fd_, n); }

 private:
  int fd_ = -1;
  uint32_t context_ = 0;
};

using Descs = std::vector<std::pair<uint32_t, uint32_t>>;

Descs descriptors(const Chunk& c, uint32_t want_context) {
  Descs d;
  EXPECT_EQ(c.type, kChunkBlockStatus);
  EXPECT_TRUE(c.flags & kChunkFlagDone);
  if (c.payload.size() < 4) return d;
  EXPECT_EQ(get32(c.payload.data()), want_context);
  for (size_t i = 4; i + 8 <= c.payload.size(); i += 8) d.emplace_back(get32(c.payload.data() + i), get32(c.payload.data() + i + 4));
  return d;
}

uint32_t error_of(const Chunk& c) {
  EXPECT_EQ(c.type, kChunkError);
  return c.payload.size() >= 4 ? get32(c.payload.data()) : ~0u;
}

constexpr uint32_t kHZ = kStateHole | kStateZero;
const ParamMap kNullMem = {{"memory_backed", "1"}, {"size", "16"}};

TEST(NbdBlockStatus, NeedsSetMetaContext) {
  Served srv("null", kNullMem, 0);
  {
    Client c(srv.path(), true, false);
    c.request(kCmdBlockStatus, 1, 0, 4096);
    const Chunk ch = c.chunk();
    EXPECT_EQ(ch.cookie, 1u);
    EXPECT_EQ(error_of(ch), kErrInval);
  }
  Client plain(srv.path(), false, false);  // without structured replies: a simple EINVAL
  plain.request(kCmdBlockStatus, 2, 0, 4096);
  uint64_t cookie = 0;
  EXPECT_EQ(plain.simple_reply(&cookie), kErrInval);
  EXPECT_EQ(cookie, 2u);
}

TEST(NbdBlockStatus, DescriptorsReqOneAndErrors) {
  Served srv("null", {{"memory_backed", "1"}, {"size", "64"}}, 0);
  Client c(srv.path(), true, true);
  ASSERT_EQ(c.context(), kBaseAllocationId);
  c.request(kCmdWrite, 1, 8192, 4096, 0, std::string(4096, 'a'));
  uint64_t cookie = 0;
  ASSERT_EQ(c.simple_reply(&cookie), 0u);
  c.request(kCmdBlockStatus, 2, 0, 65536);
  EXPECT_EQ(descriptors(c.chunk(), kBaseAllocationId), (Descs{{8192, kHZ}, {4096, 0}, {65536 - 12288, kHZ}}));
  c.request(kCmdBlockStatus, 3, 0, 65536, kCmdFlagReqOne);
  EXPECT_EQ(descriptors(c.chunk(), kBaseAllocationId), (Descs{{8192, kHZ}}));
  c.request(kCmdBlockStatus, 4, 8192 + 2048, 1024);  // clipped to the request
  EXPECT_EQ(descriptors(c.chunk(), kBaseAllocationId), (Descs{{1024, 0}}));
  c.request(kCmdBlockStatus, 5, 64 << 20, 512);  // past the end
  const Chunk err = c.chunk();
  EXPECT_EQ(err.cookie, 5u);
  EXPECT_EQ(error_of(err), kErrInval);
  // A whole export of scattered pages stops at the descriptor limit.
  for (uint64_t i = 0; i < 2 * kMaxBlockDescriptors + 4; i++) {
    c.request(kCmdWrite, 100 + i, (1 << 20) + i * 8192, 4096, 0, std::string(4096, 'b'));
    ASSERT_EQ(c.simple_reply(&cookie), 0u);
  }
  c.request(kCmdBlockStatus, 6, 1 << 20, 63 << 20);
  const Descs many = descriptors(c.chunk(), kBaseAllocationId);
  EXPECT_EQ(many.size(), kMaxBlockDescriptors);
  EXPECT_EQ(many.front(), std::make_pair(4096u, 0u));
}

TEST(NbdBlockStatus, ZeroReadsAreHolesDataReadsAreData) {
  Served srv("null", kNullMem, 0);
  Client c(srv.path(), true, false);
  c.request(kCmdWrite, 1, 4096, 4096, 0, std::string(4096, 'z'));
  uint64_t cookie = 0;
  ASSERT_EQ(c.simple_reply(&cookie), 0u);
  c.request(kCmdRead, 2, 0, 4096);
  Chunk hole = c.chunk();
  EXPECT_EQ(hole.type, kChunkOffsetHole);
  EXPECT_TRUE(hole.flags & kChunkFlagDone);
  ASSERT_EQ(hole.payload.size(), 12u);
  EXPECT_EQ(get64(hole.payload.data()), 0u);
  EXPECT_EQ(get32(hole.payload.data() + 8), 4096u);
  c.request(kCmdRead, 3, 0, 8192, kCmdFlagDf);  // part data: all of it is data
  Chunk data = c.chunk();
  EXPECT_EQ(data.type, kChunkOffsetData);
  ASSERT_EQ(data.payload.size(), 8u + 8192u);
  EXPECT_EQ(data.payload.substr(8, 4096), std::string(4096, '\0'));
  EXPECT_EQ(data.payload.substr(8 + 4096), std::string(4096, 'z'));
}

TEST(NbdBlockStatus, FastZeroIsRefusedWhereZeroingIsNotCheap) {
  // null cannot zero at all; offer WRITE_ZEROES anyway, so FAST_ZERO must
  // be answered ENOTSUP before the device sees anything.
  Served srv("null", kNullMem, kTxSendWriteZeroes | kTxSendFastZero);
  Client c(srv.path(), false, false);
  c.request(kCmdWrite, 1, 0, 4096, 0, std::string(4096, 'q'));
  uint64_t cookie = 0;
  ASSERT_EQ(c.simple_reply(&cookie), 0u);
  c.request(kCmdWriteZeroes, 2, 0, 4096, kCmdFlagFastZero);
  EXPECT_EQ(c.simple_reply(&cookie), kErrNotSup);
  EXPECT_EQ(cookie, 2u);
  c.request(kCmdRead, 3, 0, 4096);
  ASSERT_EQ(c.simple_reply(&cookie), 0u);
  EXPECT_EQ(c.read_n(4096), std::string(4096, 'q'));
}

bool have(const char* tool) { return std::system((std::string("command -v ") + tool + " >/dev/null").c_str()) == 0; }

// A command's standard output (bounded in time by `timeout`); rc in *rc.
std::string capture(const std::string& cmd, int* rc) {
  std::string out;
  FILE* p = ::popen(("timeout 30 " + cmd).c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  *rc = ::pclose(p);
  return out;
}

// nbdinfo --map lines: offset, length, type number, description.
std::vector<std::tuple<uint64_t, uint64_t, unsigned>> map_of(const std::string& uri) {
  int rc = -1;
  const std::string out = capture("nbdinfo --map '" + uri + "'", &rc);
  EXPECT_EQ(rc, 0) << out;
  std::vector<std::tuple<uint64_t, uint64_t, unsigned>> v;
  size_t pos = 0;
  while (pos < out.size()) {
    const size_t eol = out.find('\n', pos);
    const std::string line = out.substr(pos, eol == std::string::npos ? std::string::npos : eol - pos);
    unsigned long long off = 0, len = 0;
    unsigned type = 0;
    if (std::sscanf(line.c_str(), "%llu %llu %u", &off, &len, &type) == 3) v.emplace_back(off, len, type);
    if (eol == std::string::npos) break;
    pos = eol + 1;
  }
  return v;
}

TEST(NbdBlockStatus, NbdinfoMapOnNull) {
  if (!have("nbdinfo")) GTEST_SKIP() << "nbdinfo (libnbd-bin) is not installed";
  Served srv("null", kNullMem, 0);
  {
    Client c(srv.path(), false, false);
    uint64_t cookie = 0;
    c.request(kCmdWrite, 1, 1 << 20, 8192, 0, std::string(8192, 'm'));
    ASSERT_EQ(c.simple_reply(&cookie), 0u);
    c.request(kCmdWrite, 2, 4 << 20, 4096, 0, std::string(4096, 'm'));
    ASSERT_EQ(c.simple_reply(&cookie), 0u);
  }
  using M = std::vector<std::tuple<uint64_t, uint64_t, unsigned>>;
  EXPECT_EQ(map_of(srv.uri()), (M{{0, 1 << 20, 3},
                                  {1 << 20, 8192, 0},
                                  {(1 << 20) + 8192, (3 << 20) - 8192, 3},
                                  {4 << 20, 4096, 0},
                                  {(4 << 20) + 4096, (12 << 20) - 4096, 3}}));
}

TEST(NbdBlockStatus, NbdinfoMapOnASparseFile) {
  if (!have("nbdinfo")) GTEST_SKIP() << "nbdinfo (libnbd-bin) is not installed";
  const std::string f = testing::TempDir() + "blkmq_bs_sparse_" + std::to_string(getpid());
  const int fd = ::open(f.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, 8 << 20), 0);
  const std::string block(65536, 'f');
  ASSERT_EQ(::pwrite(fd, block.data(), block.size(), 2 << 20), 65536);
  ::close(fd);
  {
    Served srv("uring", {{"filename", f}}, 0);
    const auto m = map_of(srv.uri());
    ASSERT_FALSE(m.empty());
    uint64_t end = 0;
    for (auto& [off, len, type] : m) {
      EXPECT_EQ(off, end);  // contiguous from 0
      // The written block is data; the file's start and end are holes.
      if (off <= (2u << 20) && (2u << 20) < off + len) {
        EXPECT_EQ(type, 0u);
      }
      end = off + len;
    }
    EXPECT_EQ(end, 8u << 20);
    EXPECT_EQ(std::get<2>(m.front()), 3u);
    EXPECT_EQ(std::get<2>(m.back()), 3u);
  }
  ::unlink(f.c_str());
}

// nbdsh is a Python program: Debian's python3 has the nbd module, a python3
// earlier on PATH (pyenv) may not.
std::string nbdsh(const std::string& uri, const std::string& code, int* rc) {
  return capture("env PATH=/usr/bin:$PATH nbdsh --base-allocation -u '" + uri + "' -c '" + code + "' 2>&1", rc);
}

bool nbdsh_works() {
  int rc = -1;
  capture("env PATH=/usr/bin:$PATH python3 -c 'import nbd' 2>/dev/null", &rc);
  return have("nbdsh") && rc == 0;
}

TEST(NbdBlockStatus, NbdshFastZeroAndReqOneOnAFile) {
  if (!nbdsh_works()) GTEST_SKIP() << "nbdsh with python3-libnbd is not installed";
  const std::string f = testing::TempDir() + "blkmq_bs_fz_" + std::to_string(getpid());
  const int fd = ::open(f.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, 4 << 20), 0);
  ::close(fd);
  Served srv("uring", {{"filename", f}}, 0);
  // Writes data, zeroes half of it with FAST_ZERO (a file zeroes cheaply),
  // reads it back, and asks for one extent with REQ_ONE.
  const std::string code =
      "import nbd\n"
      "assert h.can_fast_zero() and h.can_meta_context(\"base:allocation\")\n"
      "h.pwrite(b\"x\" * 65536, 1 << 20)\n"
      "h.zero(32768, 1 << 20, flags=nbd.CMD_FLAG_FAST_ZERO)\n"
      "assert h.pread(65536, 1 << 20) == b\"\\0\" * 32768 + b\"x\" * 32768\n"
      "got = []\n"
      "def cb(meta, off, ents, err):\n"
      "    got.extend(ents)\n"
      "    return 0\n"
      "h.block_status(4 << 20, 0, cb, flags=nbd.CMD_FLAG_REQ_ONE)\n"
      "assert len(got) == 2 and got[0] <= 1 << 20 and got[1] == 3, got\n"
      "print(\"ok\")\n";
  int rc = -1;
  const std::string out = nbdsh(srv.uri(), code, &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("ok"), std::string::npos) << out;
  ::unlink(f.c_str());
}

TEST(NbdBlockStatus, NbdshFastZeroFailsFastOnNull) {
  if (!nbdsh_works()) GTEST_SKIP() << "nbdsh with python3-libnbd is not installed";
  Served srv("null", kNullMem, kTxSendWriteZeroes | kTxSendFastZero);
  const std::string code =
      "import nbd\n"
      "try:\n"
      "    h.zero(4096, 0, flags=nbd.CMD_FLAG_FAST_ZERO)\n"
      "    print(\"zeroed\")\n"
      "except nbd.Error as e:\n"
      "    print(\"errno\", e.errnum)\n";
  int rc = -1;
  const std::string out = nbdsh(srv.uri(), code, &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("errno 95"), std::string::npos) << out;
}

}  // namespace
}  // namespace blkmq::nbd

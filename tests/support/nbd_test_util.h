// Helpers for the NBD tests: build options and split the server's option
// replies (codec tests); a served null device, a raw socket client and
// bounded runs of the libnbd tools (server tests).
#pragma once

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "blkmq/device.h"
#include "nbd/handshake.h"
#include "nbd/server.h"
#include "nbd/wire.h"

namespace blkmq::nbd::test {

inline std::string option(uint32_t opt, std::string_view data = {}) {
  std::string s;
  put64(&s, kOptMagic);
  put32(&s, opt);
  put32(&s, static_cast<uint32_t>(data.size()));
  s.append(data);
  return s;
}

// GO/INFO data: name, then the info requests.
inline std::string go_data(std::string_view name, std::vector<uint16_t> infos = {}) {
  std::string s;
  put32(&s, static_cast<uint32_t>(name.size()));
  s.append(name);
  put16(&s, static_cast<uint16_t>(infos.size()));
  for (uint16_t i : infos) put16(&s, i);
  return s;
}

inline std::string meta_data(std::string_view name, std::vector<std::string> queries) {
  std::string s;
  put32(&s, static_cast<uint32_t>(name.size()));
  s.append(name);
  put32(&s, static_cast<uint32_t>(queries.size()));
  for (const std::string& q : queries) {
    put32(&s, static_cast<uint32_t>(q.size()));
    s.append(q);
  }
  return s;
}

inline std::string client_flags(uint32_t f) {
  std::string s;
  put32(&s, f);
  return s;
}

struct OptReply {
  uint32_t opt = 0, type = 0;
  std::string data;
};

// Splits option replies; stops at the first malformed one (and adds a reply
// with type 0 so a test notices).
inline std::vector<OptReply> replies(std::string_view s) {
  std::vector<OptReply> v;
  while (!s.empty()) {
    if (s.size() < 20 || get64(s.data()) != kRepMagic) {
      v.push_back({});
      break;
    }
    const uint32_t len = get32(s.data() + 16);
    if (s.size() < 20 + len) {
      v.push_back({});
      break;
    }
    v.push_back({get32(s.data() + 8), get32(s.data() + 12), std::string(s.substr(20, len))});
    s.remove_prefix(20 + len);
  }
  return v;
}

// Up to `n` bytes from `fd`: fewer only at EOF or an error.
inline std::string read_exactly(int fd, size_t n) {
  std::string s(n, '\0');
  size_t got = 0;
  while (got < n) {
    const ssize_t k = ::read(fd, s.data() + got, n - got);
    if (k <= 0) break;
    got += static_cast<size_t>(k);
  }
  s.resize(got);
  return s;
}

// A device served on a temp socket by a thread, as export "disk".
class Served {
 public:
  // A memory-backed null device of `size_mib`, min block 512, FLUSH, FUA
  // and MULTI_CONN (and READ_ONLY) offered.
  explicit Served(bool read_only = false, uint64_t size_mib = 64, ConnLimits lim = {}, TlsConfig tls = {}) {
    open_device("null", {{"memory_backed", "1"}, {"size", std::to_string(size_mib)}});
    ExportDef e;
    e.min_block = 512;
    e.tx_flags = kTxSendFlush | kTxSendFua | kTxCanMultiConn | (read_only ? kTxReadOnly : 0);
    start(e, lim, std::move(tls));
  }
  // A device of `driver` with `params`, its export built the way blkmq nbd
  // builds it (trim, write zeroes and fast zero from the limits); `tx_extra`
  // adds transmission flags.
  Served(const std::string& driver, const ParamMap& params, uint16_t tx_extra) {
    open_device(driver, params);
    const QueueLimits& l = dev_->queue().limits();
    ExportDef e;
    e.min_block = l.logical_block_size;
    e.tx_flags = kTxSendFlush | tx_extra;
    if (l.max_discard_sectors) e.tx_flags |= kTxSendTrim;
    if (l.max_write_zeroes_sectors) e.tx_flags |= kTxSendWriteZeroes | kTxSendFastZero;
    start(e, {}, {});
  }
  ~Served() {
    server_->stop();
    thread_.join();
  }
  const std::string& path() const { return path_; }
  std::string uri() const { return server_->uri(); }

 private:
  void open_device(const std::string& driver, const ParamMap& params) {
    path_ = testing::TempDir() + "blkmq_nbd_" + std::to_string(getpid()) + "_" + std::to_string(counter_++) + ".sock";
    auto d = create_device(driver, params);
    EXPECT_TRUE(d.ok()) << d.status().message();
    dev_ = std::move(*d);
  }
  // base:allocation as blkmq nbd offers it: nbdcopy then skips holes.
  void start(ExportDef e, ConnLimits lim, TlsConfig tls) {
    e.name = "disk";
    e.size = dev_->size_bytes();
    e.base_allocation = dev_->reports_allocation();
    hs_.exports = {e};
    exports_ = {{e, &dev_->queue(), dev_.get()}};
    ServerConfig sc;
    sc.socket_path = path_;
    sc.conn = lim;
    sc.tls = std::move(tls);
    auto s = Server::listen(sc, hs_, exports_);
    EXPECT_TRUE(s.ok()) << s.status().message();
    server_ = std::move(*s);
    thread_ = std::thread([this] { server_->serve(); });
  }

  static inline int counter_ = 0;
  std::string path_;
  std::unique_ptr<Device> dev_;
  HandshakeConfig hs_;
  std::vector<Export> exports_;
  std::unique_ptr<Server> server_;
  std::thread thread_;
};

// Speaks the protocol with the codec: handshake with GO, then requests.
class RawClient {
 public:
  explicit RawClient(const std::string& path) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
    EXPECT_EQ(::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    const timeval tv{20, 0};  // a server that answers nothing fails the test instead of hanging it
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~RawClient() { ::close(fd_); }
  // Reads the greeting and sends the client flags.
  bool greet() {
    if (read_n(18).size() != 18) return false;
    send(test::client_flags(kClientFixedNewstyle | kClientNoZeroes));
    return true;
  }
  // GO; with `block_size` the client asks for NBD_INFO_BLOCK_SIZE and so
  // agrees to the advertised minimum (without it, the server takes any
  // byte range).
  bool go(const std::string& name, bool block_size = false) {
    if (!greet()) return false;
    send(test::option(kOptGo, block_size ? test::go_data(name, {kInfoBlockSize}) : test::go_data(name)));
    for (;;) {  // replies until ACK or an error
      const OptReply r = option_reply();
      if (r.type == kRepAck) return true;
      if (r.type == 0 || (r.type & kRepErrBit)) return false;
    }
  }
  // Drops what the server still sends (a TLS alert, say) until it closes:
  // true on EOF, false when the receive timeout ran out first.
  bool wait_closed() {
    char buf[4096];
    for (;;) {
      const ssize_t k = ::read(fd_, buf, sizeof buf);
      if (k == 0) return true;
      if (k < 0 && errno != EINTR) return errno == ECONNRESET;
    }
  }
  // One option reply; type 0 when the server closed instead.
  OptReply option_reply() {
    const std::string h = read_n(20);
    if (h.size() != 20 || get64(h.data()) != kRepMagic) return {};
    return {get32(h.data() + 8), get32(h.data() + 12), read_n(get32(h.data() + 16))};
  }
  void send(const std::string& s) { ASSERT_EQ(::write(fd_, s.data(), s.size()), static_cast<ssize_t>(s.size())); }
  void request(uint16_t type, uint64_t cookie, uint64_t off, uint32_t len, const std::string& payload = {}) {
    Request r;
    r.type = type;
    r.cookie = cookie;
    r.offset = off;
    r.length = len;
    send(encode_request(r) + payload);
  }
  // A simple reply: its error, and `data_len` bytes of data if it is 0.
  uint32_t reply(uint64_t* cookie, uint32_t data_len = 0, std::string* data = nullptr) {
    const std::string h = read_n(16);
    if (h.size() != 16 || get32(h.data()) != kSimpleReplyMagic) return ~0u;
    *cookie = get64(h.data() + 8);
    const uint32_t err = get32(h.data() + 4);
    if (err == 0 && data_len) {
      std::string d = read_n(data_len);
      if (data) *data = std::move(d);
    }
    return err;
  }
  std::string read_n(size_t n) { return read_exactly(fd_, n); }

 private:
  int fd_ = -1;
};

inline bool have(const char* tool) {
  std::string cmd = "command -v ";  // built by appends: GCC 12 warns (-Warray-bounds) about the operator+ chain
  cmd += tool;
  cmd += " >/dev/null";
  return std::system(cmd.c_str()) == 0;
}

// Runs one command (redirections allowed, no pipes or lists) under
// `timeout`, so a hung client fails the test instead of hanging it; its
// exit status (124 when it timed out).
inline int run_bounded(const std::string& cmd, int seconds = 60) {
  const int rc = std::system(("timeout -k 5 " + std::to_string(seconds) + " " + cmd).c_str());
  return rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

}  // namespace blkmq::nbd::test

// What the NBD regression tests share: a device served on a temp Unix socket
// by a thread, and a raw client's socket calls (greeting, GO, whole reads).
#pragma once

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "blkmq/device.h"
#include "support/nbd_test_util.h"
#include "nbd/server.h"

namespace blkmq::nbd::regress {

// `dev` as the default export (no name) until destruction.
class Served {
 public:
  // tx_extra: transmission flags offered beyond FLUSH and FUA (kTxSendTrim...).
  Served(std::unique_ptr<Device> dev, ServerConfig sc, uint32_t min_block = 1, uint16_t tx_extra = 0)
      : dev_(std::move(dev)) {
    static int counter = 0;
    sc.socket_path = testing::TempDir() + "blkmq_regress_" + std::to_string(getpid()) + "_" +
                     std::to_string(counter++) + ".sock";
    path_ = sc.socket_path;
    ExportDef e;
    e.size = dev_->size_bytes();
    e.min_block = min_block;
    e.tx_flags = kTxSendFlush | kTxSendFua | tx_extra;
    hs_.exports = {e};
    exports_ = {{e, &dev_->queue(), dev_.get()}};
    auto s = Server::listen(sc, hs_, exports_);
    EXPECT_TRUE(s.ok()) << s.status().message();
    if (!s.ok()) return;
    server_ = std::move(*s);
    thread_ = std::thread([this] { server_->serve(); });
  }
  ~Served() {
    if (!server_) return;
    server_->stop();
    thread_.join();
  }
  const std::string& path() const { return path_; }
  Device& device() { return *dev_; }
  Server& server() { return *server_; }

 private:
  std::unique_ptr<Device> dev_;
  HandshakeConfig hs_;
  std::vector<Export> exports_;
  std::unique_ptr<Server> server_;
  std::thread thread_;
  std::string path_;
};

// A server with no exports listening at `path` (not serving): what a
// listener does to the path is all that is asked of it.
inline Result<std::unique_ptr<Server>> listen_at(const std::string& path) {
  static const HandshakeConfig hs;
  static const std::vector<Export> none;
  ServerConfig sc;
  sc.socket_path = path;
  return Server::listen(sc, hs, none);
}

// A fresh path under the test's temp dir, nothing there yet.
inline std::string temp_path(const std::string& tag) {
  static int counter = 0;
  std::string p = testing::TempDir() + "blkmq_" + tag + "_" + std::to_string(getpid()) + "_" +
                  std::to_string(counter++);
  ::unlink(p.c_str());
  return p;
}

inline int connect_unix(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  const timeval tv{5, 0};  // a wrong server fails the test instead of hanging it
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

// Socket calls here retry EINTR: a thread that set up an io_uring device
// (the uring driver's rings) gets task-work interrupts, and a socket with a
// receive time-out reports them as EINTR instead of restarting.
inline ssize_t read_some(int fd, char* p, size_t n) {
  ssize_t k;
  do {
    k = ::read(fd, p, n);
  } while (k < 0 && errno == EINTR);
  return k;
}

inline std::string read_n(int fd, size_t n) {
  std::string s(n, '\0');
  size_t got = 0;
  for (ssize_t k; got < n && (k = read_some(fd, s.data() + got, n - got)) > 0;) got += static_cast<size_t>(k);
  s.resize(got);
  return s;
}

inline bool send_all(int fd, std::string_view s) {
  for (size_t done = 0; done < s.size();) {
    const ssize_t k = ::send(fd, s.data() + done, s.size() - done, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    done += static_cast<size_t>(k);
  }
  return true;
}

// The peer closed: end of file, not the 5 s receive limit.
inline bool closed_by_peer(int fd) {
  char c;
  return read_some(fd, &c, 1) == 0;
}

// Greeting, flags and GO on the default export; true at the ACK. With
// `agree_block_size` the GO asks for NBD_INFO_BLOCK_SIZE, and so agrees to
// the advertised minimum block (without it the server takes any byte range).
inline bool go(int fd, bool agree_block_size = false) {
  if (read_n(fd, 18).size() != 18) return false;
  const std::string data = agree_block_size ? test::go_data("", {kInfoBlockSize}) : test::go_data("");
  if (!send_all(fd, test::client_flags(kClientFixedNewstyle | kClientNoZeroes) + test::option(kOptGo, data)))
    return false;
  for (std::string h; (h = read_n(fd, 20)).size() == 20;) {
    const uint32_t type = get32(h.data() + 12);
    read_n(fd, get32(h.data() + 16));
    if (type == kRepAck) return true;
    if (type & kRepErrBit) return false;
  }
  return false;
}

// Sends one request (and its payload) and reads the simple reply's error;
// ~0u if no well-formed reply came. A successful READ's data goes to *data.
inline uint32_t request(int fd, uint16_t type, uint64_t off, uint32_t len, const std::string& payload = {},
                        std::string* data = nullptr, uint16_t flags = 0) {
  if (!send_all(fd, encode_request(Request{flags, type, 1, off, len}) + payload)) return ~0u;
  const std::string h = read_n(fd, kSimpleReplySize);
  if (h.size() != kSimpleReplySize || get32(h.data()) != kSimpleReplyMagic) return ~0u;
  const uint32_t err = get32(h.data() + 4);
  if (err == 0 && type == kCmdRead) {
    std::string d = read_n(fd, len);
    if (data) *data = std::move(d);
  }
  return err;
}

}  // namespace blkmq::nbd::regress

// Regression: a TLS 1.3 KeyUpdate ended the connection. The receive timeout
// of the handshake was never cleared, so a record without data (the key
// update) read as a timeout; and a KeyUpdate that asks for ours would have
// had the reader send it while the writer was sending replies on the same
// session. The client here is GnuTLS's own, with PSK, over the NBD
// handshake; it asks the server to update its keys in the middle of a
// stream of READs and expects every reply (TSan checks the sends).
#include <gnutls/gnutls.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "support/nbd_regress_util.h"

namespace blkmq::nbd::regress {
namespace {

constexpr const char* kUser = "alice";
constexpr const char* kKeyHex = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

class TlsClient {
 public:
  explicit TlsClient(int fd) : fd_(fd) {}
  ~TlsClient() {
    if (s_) gnutls_deinit(s_);
    if (cred_) gnutls_psk_free_client_credentials(cred_);
  }
  bool start() {
    gnutls_datum_t key{reinterpret_cast<unsigned char*>(const_cast<char*>(kKeyHex)),
                       static_cast<unsigned>(std::string(kKeyHex).size())};
    if (gnutls_psk_allocate_client_credentials(&cred_) < 0) return false;
    if (gnutls_psk_set_client_credentials(cred_, kUser, &key, GNUTLS_PSK_KEY_HEX) < 0) return false;
    if (gnutls_init(&s_, GNUTLS_CLIENT | GNUTLS_NO_SIGNAL) < 0) return false;  // a closed server must not SIGPIPE the test
    gnutls_priority_set_direct(s_, "NORMAL:-VERS-ALL:+VERS-TLS1.3:+ECDHE-PSK:+DHE-PSK:+PSK", nullptr);
    gnutls_credentials_set(s_, GNUTLS_CRD_PSK, cred_);
    gnutls_transport_set_int(s_, fd_);
    int rc;
    do rc = gnutls_handshake(s_);
    while (rc < 0 && !gnutls_error_is_fatal(rc));
    return rc >= 0 && gnutls_protocol_get_version(s_) == GNUTLS_TLS1_3;
  }
  bool send(const std::string& d) {
    for (size_t off = 0; off < d.size();) {
      const ssize_t k = gnutls_record_send(s_, d.data() + off, d.size() - off);
      if (k == GNUTLS_E_AGAIN || k == GNUTLS_E_INTERRUPTED) continue;
      if (k <= 0) return false;
      off += static_cast<size_t>(k);
    }
    return true;
  }
  std::string recv_n(size_t n) {
    std::string out(n, '\0');
    size_t got = 0;
    while (got < n) {
      const ssize_t k = gnutls_record_recv(s_, out.data() + got, n - got);
      if (k == GNUTLS_E_AGAIN || k == GNUTLS_E_INTERRUPTED) continue;
      if (k <= 0) break;
      got += static_cast<size_t>(k);
    }
    out.resize(got);
    return out;
  }
  // Updates our keys and asks the server to update its own.
  bool key_update() { return gnutls_session_key_update(s_, GNUTLS_KU_PEER) == 0; }

 private:
  const int fd_;
  gnutls_session_t s_ = nullptr;
  gnutls_psk_client_credentials_t cred_ = nullptr;
};

TEST(NbdRegress, TlsKeyUpdateInTheMiddleOfTransmissionKeepsTheConnection) {
  const std::string psk = testing::TempDir() + "blkmq_ku_" + std::to_string(getpid()) + ".psk";
  std::ofstream(psk) << kUser << ":" << kKeyHex << "\n";
  auto dev = create_device("null", {{"size", "16"}, {"memory_backed", "1"}});
  ASSERT_TRUE(dev.ok()) << dev.status().message();
  ServerConfig sc;
  sc.tls.mode = TlsMode::require;
  sc.tls.psk_file = psk;
  {
    Served s(std::move(*dev), sc);
    const int fd = connect_unix(s.path());
    ASSERT_EQ(read_n(fd, 18).size(), 18u);
    ASSERT_TRUE(send_all(fd, test::client_flags(kClientFixedNewstyle | kClientNoZeroes) + test::option(kOptStartTls)));
    const std::string ack = read_n(fd, 20);
    ASSERT_EQ(ack.size(), 20u);
    ASSERT_EQ(get32(ack.data() + 12), uint32_t{kRepAck});
    TlsClient c(fd);
    ASSERT_TRUE(c.start()) << "no TLS 1.3 session with the server";
    ASSERT_TRUE(c.send(test::option(kOptGo, test::go_data(""))));
    for (std::string h;;) {
      h = c.recv_n(20);
      ASSERT_EQ(h.size(), 20u);
      c.recv_n(get32(h.data() + 16));
      if (get32(h.data() + 12) == kRepAck) break;
      ASSERT_FALSE(get32(h.data() + 12) & kRepErrBit);
    }
    // READs in flight while the keys change both ways: the server must
    // answer every one, and send its own KeyUpdate without racing its writer.
    constexpr int kReads = 64;
    std::string batch;
    for (int i = 0; i < kReads; i++) batch += encode_request(Request{0, kCmdRead, uint64_t(i), uint64_t(i) * 4096, 65536});
    ASSERT_TRUE(c.send(batch.substr(0, batch.size() / 2)));
    ASSERT_TRUE(c.key_update());
    ASSERT_TRUE(c.send(batch.substr(batch.size() / 2)));
    int answered = 0;
    for (; answered < kReads; answered++) {
      const std::string h = c.recv_n(kSimpleReplySize);
      if (h.size() != kSimpleReplySize || get32(h.data()) != kSimpleReplyMagic || get32(h.data() + 4) != 0) break;
      if (c.recv_n(65536).size() != 65536) break;
    }
    EXPECT_EQ(answered, kReads) << "the connection ended at the key update";
    // And once more, after the update, a fresh request.
    ASSERT_TRUE(c.key_update());
    ASSERT_TRUE(c.send(encode_request(Request{0, kCmdRead, 99, 0, 512})));
    const std::string h = c.recv_n(kSimpleReplySize);
    ASSERT_EQ(h.size(), kSimpleReplySize);
    EXPECT_EQ(get32(h.data() + 4), 0u);
    c.recv_n(512);
    ::close(fd);
  }
  std::remove(psk.c_str());
}

}  // namespace
}  // namespace blkmq::nbd::regress

// TLS for blkmq nbd's server, end to end over a Unix socket: certificates
// and keys made here with certtool and psktool; real clients (nbdinfo,
// nbdcopy through libnbd's nbds+unix URIs) over X.509 and PSK; a raw client
// for what --tls=require refuses before STARTTLS and for broken TLS
// handshakes, after each of which the server still serves.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <random>
#include <thread>

#include "support/nbd_test_util.h"
#include "support/wait.h"

namespace blkmq::nbd {
namespace {

using test::have;
using test::OptReply;
using test::RawClient;
using test::run_bounded;
using test::Served;

// A CA; server/ (the server's --tls-certificates), client/ (CA and a
// client certificate), noclient/ (CA only), noca/ (server files without
// ca-cert.pem); keys.psk and wrong.psk (both for alice, different keys).
constexpr const char* kMakeCredentials = R"(set -e
cd "$1"
mkdir -p server client noclient noca
key() { certtool --generate-privkey --key-type=ecdsa --outfile "$1" 2>/dev/null; }
sign() { certtool --generate-certificate --load-ca-certificate ca-cert.pem --load-ca-privkey ca-key.pem \
  --load-privkey "$1" --template "$2" --outfile "$3" 2>/dev/null; }
key ca-key.pem
printf 'cn = blkmq test CA\nca\ncert_signing_key\nexpiration_days = 2\n' > ca.info
certtool --generate-self-signed --load-privkey ca-key.pem --template ca.info --outfile ca-cert.pem 2>/dev/null
key server/server-key.pem
printf 'cn = localhost\ndns_name = localhost\nip_address = 127.0.0.1\ntls_www_server\nencryption_key\nsigning_key\nexpiration_days = 2\n' > server.info
sign server/server-key.pem server.info server/server-cert.pem
key client/client-key.pem
printf 'cn = alice\ntls_www_client\nencryption_key\nsigning_key\nexpiration_days = 2\n' > client.info
sign client/client-key.pem client.info client/client-cert.pem
cp ca-cert.pem server/ && cp ca-cert.pem client/ && cp ca-cert.pem noclient/
cp server/server-cert.pem server/server-key.pem noca/
psktool -u alice -p keys.psk >/dev/null
psktool -u alice -p wrong.psk >/dev/null
)";

class NbdTls : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = testing::TempDir() + "blkmq_tls_" + std::to_string(getpid());
    if (!have("certtool") || !have("psktool")) return;
    std::system(("rm -rf " + dir_ + " && mkdir -p " + dir_).c_str());
    std::ofstream(dir_ + "/make.sh") << kMakeCredentials;
    made_ = run_bounded("sh " + dir_ + "/make.sh " + dir_, 60) == 0;
  }
  static void TearDownTestSuite() { std::system(("rm -rf " + dir_).c_str()); }
  void SetUp() override {
    if (!have("certtool") || !have("psktool")) GTEST_SKIP() << "certtool/psktool (gnutls-bin) are not installed";
    if (!have("nbdinfo") || !have("nbdcopy")) GTEST_SKIP() << "nbdinfo/nbdcopy (libnbd-bin) are not installed";
    ASSERT_TRUE(made_) << "certtool or psktool failed in " << dir_;
  }

  static TlsConfig x509(TlsMode mode, bool verify_peer = false) {
    TlsConfig t;
    t.mode = mode;
    t.certificates = dir_ + "/server";
    t.verify_peer = verify_peer;
    return t;
  }
  static TlsConfig psk(TlsMode mode) {
    TlsConfig t;
    t.mode = mode;
    t.psk_file = dir_ + "/keys.psk";
    return t;
  }
  // libnbd URIs: nbds+unix requires TLS; the client's certificates dir, or
  // the PSK user in the URI's user part (libnbd 1.14 takes it from there).
  static std::string x509_uri(const Served& s, const std::string& client_dir = "client") {
    return "nbds+unix:///?socket=" + s.path() + "&tls-certificates=" + dir_ + "/" + client_dir;
  }
  static std::string psk_uri(const Served& s, const std::string& file = "keys.psk") {
    return "nbds+unix://alice@/?socket=" + s.path() + "&tls-psk-file=" + dir_ + "/" + file;
  }
  static std::string plain_uri(const Served& s) { return "nbd+unix:///?socket=" + s.path(); }

  // nbdinfo's exit status; *json gets what it printed.
  static int nbdinfo(const std::string& uri, std::string* json = nullptr) {
    const std::string out = dir_ + "/nbdinfo.json";
    const int rc = run_bounded("nbdinfo --json '" + uri + "' > " + out + " 2> " + dir_ + "/nbdinfo.err", 30);
    if (json) {
      std::ifstream f(out);
      json->assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    }
    return rc;
  }

  static inline std::string dir_;
  static inline bool made_ = false;
};

TEST_F(NbdTls, X509ClientSeesTheExport) {
  Served srv(false, 64, {}, x509(TlsMode::require));
  EXPECT_EQ(srv.uri().rfind("nbds+unix://", 0), 0u) << srv.uri();
  std::string json;
  ASSERT_EQ(nbdinfo(x509_uri(srv), &json), 0);
  EXPECT_NE(json.find("\"export-size\": 67108864"), std::string::npos) << json;
}

TEST_F(NbdTls, NbdcopyRoundTripOverTlsIsByteIdentical) {
  Served srv(false, 64, {}, x509(TlsMode::require));
  const std::string in = dir_ + "/copy_in", out = dir_ + "/copy_out";
  constexpr int kBytes = 4 << 20;
  {
    std::mt19937_64 rng(7);
    std::ofstream f(in, std::ios::binary);
    for (int i = 0; i < kBytes / 8; i++) {
      const uint64_t v = rng();
      f.write(reinterpret_cast<const char*>(&v), sizeof v);
    }
  }
  ASSERT_EQ(run_bounded("nbdcopy " + in + " '" + x509_uri(srv) + "'"), 0);
  ASSERT_EQ(run_bounded("nbdcopy '" + x509_uri(srv) + "' " + out), 0);
  EXPECT_EQ(run_bounded("cmp -n " + std::to_string(kBytes) + " " + in + " " + out), 0);
}

// Issue 26: 32 MiB requests (the spec's largest) both ways, over TLS with
// a PSK and in plaintext on the same server (--tls=on): the payload goes
// straight into the request's buffer, and what comes back is what went in.
TEST_F(NbdTls, NbdcopyWith32MiBRequestsOverPskAndPlaintextIsByteIdentical) {
  Served srv(false, 64, {}, psk(TlsMode::on));
  const std::string in = dir_ + "/big_in", out = dir_ + "/big_out";
  constexpr int kBytes = 64 << 20;
  {
    std::mt19937_64 rng(26);
    std::vector<uint64_t> v(kBytes / 8);
    for (uint64_t& x : v) x = rng();
    std::ofstream(in, std::ios::binary).write(reinterpret_cast<const char*>(v.data()), kBytes);
  }
  for (const std::string& uri : {psk_uri(srv), plain_uri(srv)}) {
    SCOPED_TRACE(uri);
    std::remove(out.c_str());
    ASSERT_EQ(run_bounded("nbdcopy --request-size=33554432 " + in + " '" + uri + "'", 120), 0);
    ASSERT_EQ(run_bounded("nbdcopy --request-size=33554432 '" + uri + "' " + out, 120), 0);
    EXPECT_EQ(run_bounded("cmp " + in + " " + out), 0);
  }
  std::remove(in.c_str());
  std::remove(out.c_str());
}

TEST_F(NbdTls, RequireRefusesAPlaintextClientAndServesTlsAfterwards) {
  Served srv(false, 64, {}, x509(TlsMode::require));
  EXPECT_NE(nbdinfo(plain_uri(srv)), 0);
  EXPECT_EQ(nbdinfo(x509_uri(srv)), 0);
}

// The spec: with TLS required, every option but STARTTLS and ABORT gets
// ERR_TLS_REQD (so no export list leaks), and EXPORT_NAME, which cannot
// carry an error, closes the connection.
TEST_F(NbdTls, RequireAnswersOptionsBeforeStartTlsWithTlsReqd) {
  Served srv(false, 64, {}, x509(TlsMode::require));
  RawClient c(srv.path());
  ASSERT_TRUE(c.greet());
  c.send(test::option(kOptList));
  const OptReply list = c.option_reply();
  EXPECT_EQ(list.opt, kOptList);
  EXPECT_EQ(list.type, kRepErrTlsReqd);  // not REP_SERVER: the export's name stays hidden
  c.send(test::option(kOptInfo, test::go_data("disk")));
  EXPECT_EQ(c.option_reply().type, kRepErrTlsReqd);
  c.send(test::option(kOptGo, test::go_data("disk")));
  EXPECT_EQ(c.option_reply().type, kRepErrTlsReqd);
  c.send(test::option(kOptExportName, "disk"));
  EXPECT_TRUE(c.wait_closed());
}

TEST_F(NbdTls, OnServesPlaintextAndTlsClients) {
  Served srv(false, 64, {}, x509(TlsMode::on));
  EXPECT_EQ(srv.uri().rfind("nbd+unix://", 0), 0u) << srv.uri();
  EXPECT_EQ(nbdinfo(plain_uri(srv)), 0);
  EXPECT_EQ(nbdinfo(x509_uri(srv)), 0);
  RawClient c(srv.path());  // and a raw plaintext client reaches the export
  EXPECT_TRUE(c.go("disk"));
}

TEST_F(NbdTls, PskRightKeyServesWrongKeyFailsCleanly) {
  Served srv(false, 64, {}, psk(TlsMode::require));
  std::string json;
  ASSERT_EQ(nbdinfo(psk_uri(srv), &json), 0);
  EXPECT_NE(json.find("\"export-size\": 67108864"), std::string::npos) << json;
  EXPECT_NE(nbdinfo(psk_uri(srv, "wrong.psk")), 0);
  EXPECT_EQ(nbdinfo(psk_uri(srv)), 0);  // the failed handshake harmed nothing
}

// After the ACK the server expects a TLS ClientHello; garbage fails the TLS
// handshake, which ends that connection and no other.
TEST_F(NbdTls, GarbageAfterStartTlsEndsThatConnectionOnly) {
  Served srv(false, 64, {}, x509(TlsMode::require));
  {
    RawClient c(srv.path());
    ASSERT_TRUE(c.greet());
    c.send(test::option(kOptStartTls));
    ASSERT_EQ(c.option_reply().type, kRepAck);
    c.send(std::string(64, 'G') + "not a TLS record");
    EXPECT_TRUE(c.wait_closed());
  }
  {
    RawClient c(srv.path());  // bytes sent with STARTTLS, before its ACK: a protocol error
    ASSERT_TRUE(c.greet());
    c.send(test::option(kOptStartTls) + test::option(kOptList));
    EXPECT_TRUE(c.wait_closed());
  }
  EXPECT_EQ(nbdinfo(x509_uri(srv)), 0);
}

TEST_F(NbdTls, VerifyPeerRefusesAClientWithoutACertificate) {
  Served srv(false, 64, {}, x509(TlsMode::require, true));
  EXPECT_NE(nbdinfo(x509_uri(srv, "noclient")), 0);
  EXPECT_EQ(nbdinfo(x509_uri(srv, "client")), 0);
}

// A client that ACKs into TLS and then sends nothing: the handshake timeout
// ends it, and a server stop does not wait for that timeout either.
TEST_F(NbdTls, StalledTlsHandshakeIsBoundedAndStopDoesNotWaitForIt) {
  ConnLimits lim;
  lim.tls_handshake_timeout_ms = 300;
  {
    Served srv(false, 64, lim, x509(TlsMode::require));
    RawClient c(srv.path());
    ASSERT_TRUE(c.greet());
    c.send(test::option(kOptStartTls));
    ASSERT_EQ(c.option_reply().type, kRepAck);
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_TRUE(c.wait_closed());
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  }
  auto srv = std::make_unique<Served>(false, 64, ConnLimits{}, x509(TlsMode::require));  // 10 s timeout
  RawClient c(srv->path());
  ASSERT_TRUE(c.greet());
  c.send(test::option(kOptStartTls));
  ASSERT_EQ(c.option_reply().type, kRepAck);
  const auto t0 = std::chrono::steady_clock::now();
  srv.reset();  // stop() and join
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

// A TLS client idle in transmission (libnbd's Python binding, which can
// hold a connection open): a server stop wakes the reader out of
// gnutls_record_recv at once, through shutdown(SHUT_RD), as it does without
// TLS; it does not wait for the client.
TEST_F(NbdTls, StopWakesAReaderInsideTls) {
  if (std::system("/usr/bin/python3 -c 'import nbd' 2>/dev/null") != 0) GTEST_SKIP() << "python3-libnbd is not installed";
  auto srv = std::make_unique<Served>(false, 64, ConnLimits{}, psk(TlsMode::require));
  const std::string up = dir_ + "/client_up";
  std::remove(up.c_str());
  // The client makes `up` once through TLS, then stays idle in
  // transmission for longer than the stop may take (real time by design).
  const std::string script = "import nbd, time\nh = nbd.NBD()\nh.set_uri_allow_local_file(True)\nh.connect_uri(\"" +
                             psk_uri(*srv) + "\")\nh.pread(512, 0)\nopen(\"" + up + "\", \"w\").close()\ntime.sleep(5)\n";
  std::ofstream(dir_ + "/idle.py") << script;
  std::thread client([&] { run_bounded("/usr/bin/python3 " + dir_ + "/idle.py", 30); });
  EXPECT_TRUE(blkmq::test::wait_for_path(up)) << "the client never got through TLS";
  const auto t0 = std::chrono::steady_clock::now();
  srv.reset();  // stop() and join
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(4));
  client.join();
}

// Server::listen refuses bad credentials with the file's name, and the
// server never starts.
TEST_F(NbdTls, BadCredentialsStopTheServerFromStarting) {
  HandshakeConfig hs;
  std::vector<Export> exports;
  auto refused = [&](TlsConfig t) {
    ServerConfig sc;
    sc.socket_path = dir_ + "/refused.sock";
    sc.tls = std::move(t);
    auto s = Server::listen(sc, hs, exports);
    EXPECT_FALSE(s.ok());
    return s.ok() ? std::string() : s.status().message();
  };
  TlsConfig t = x509(TlsMode::require);
  t.certificates = dir_ + "/client";  // no server-cert.pem there
  EXPECT_NE(refused(t).find("server-cert.pem"), std::string::npos);
  t.certificates = dir_ + "/noca";
  t.verify_peer = true;  // needs ca-cert.pem
  EXPECT_NE(refused(t).find("ca-cert.pem"), std::string::npos);
  t = x509(TlsMode::require);
  std::ofstream(dir_ + "/bad.psk") << "alice:nothex\n";
  t.certificates.clear();
  t.psk_file = dir_ + "/bad.psk";
  EXPECT_NE(refused(t).find("bad.psk"), std::string::npos);
  t.psk_file = dir_ + "/missing.psk";
  EXPECT_NE(refused(t).find("missing.psk"), std::string::npos);
  t.psk_file.clear();  // neither
  EXPECT_FALSE(refused(t).empty());
  EXPECT_NE(access((dir_ + "/refused.sock").c_str(), F_OK), 0) << "a refused server left its socket";
}

// A PSK shorter than 16 bytes falls to brute force: refused, naming the
// file and the line; 16 bytes are enough.
TEST_F(NbdTls, ShortPskIsRefusedNamingTheLine) {
  HandshakeConfig hs;
  std::vector<Export> exports;
  ServerConfig sc;
  sc.socket_path = dir_ + "/shortkey.sock";
  sc.tls.mode = TlsMode::require;
  sc.tls.psk_file = dir_ + "/short.psk";
  std::ofstream(sc.tls.psk_file) << "bob:00112233445566778899aabbccddeeff\n"   // 16 bytes: fine
                                 << "alice:00112233445566778899aabbccddee\n";   // 15 bytes
  auto s = Server::listen(sc, hs, exports);
  ASSERT_FALSE(s.ok()) << "a 15-byte PSK was accepted";
  const std::string m = s.status().message();
  EXPECT_NE(m.find("short.psk line 2"), std::string::npos) << m;
  EXPECT_NE(m.find("too short"), std::string::npos) << m;
  EXPECT_NE(m.find("16 bytes"), std::string::npos) << m;
  std::ofstream(sc.tls.psk_file) << "bob:00112233445566778899aabbccddeeff\n";
  auto ok = Server::listen(sc, hs, exports);
  EXPECT_TRUE(ok.ok()) << ok.status().message();
}

}  // namespace
}  // namespace blkmq::nbd

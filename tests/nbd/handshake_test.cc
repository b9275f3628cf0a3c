// The fixed-newstyle handshake state machine: every option of the issue's
// list, the spec's errors, staying in sync after a refused or oversized
// option, TLS-required mode, and byte-at-a-time input.
#include <gtest/gtest.h>

#include "nbd/handshake.h"
#include "support/nbd_test_util.h"

namespace blkmq::nbd {
namespace {

using test::go_data;
using test::meta_data;
using test::option;
using test::replies;

HandshakeConfig two_exports() {
  HandshakeConfig c;
  ExportDef a;
  a.name = "disk";
  a.description = "the first";
  a.size = 1 << 30;
  a.min_block = 512;
  a.tx_flags = kTxSendFlush | kTxSendFua | kTxSendTrim;
  a.base_allocation = true;
  ExportDef b;
  b.name = "ro";
  b.size = 4096;
  b.tx_flags = kTxReadOnly;
  c.exports = {a, b};
  return c;
}

// Runs flags + options through a fresh handshake, all at once.
struct Client {
  explicit Client(const HandshakeConfig& c, uint32_t flags = kClientFixedNewstyle | kClientNoZeroes) : h(c) {
    EXPECT_EQ(h.consume(test::client_flags(flags), &out), 4u);
  }
  size_t feed(const std::string& s) { return h.consume(s, &out); }
  Handshake h;
  std::string out;
};

TEST(NbdHandshake, GreetingIsFixedNewstyleWithNoZeroes) {
  const std::string g = Handshake::greeting();
  ASSERT_EQ(g.size(), 18u);
  EXPECT_EQ(get64(g.data()), kNbdMagic);
  EXPECT_EQ(get64(g.data() + 8), kOptMagic);
  EXPECT_EQ(get16(g.data() + 16), kFlagFixedNewstyle | kFlagNoZeroes);
}

TEST(NbdHandshake, UnknownClientFlagCloses) {
  HandshakeConfig c = two_exports();
  Handshake h(c);
  std::string out;
  h.consume(test::client_flags(1u << 5), &out);
  EXPECT_EQ(h.state(), Handshake::State::closed);
  EXPECT_TRUE(out.empty());
}

TEST(NbdHandshake, GoSendsExportInfoBlockSizeAndStartsTransmission) {
  HandshakeConfig c = two_exports();
  Client r(c);
  r.feed(option(kOptGo, go_data("disk", {kInfoBlockSize, kInfoDescription, 999})));
  const auto rep = replies(r.out);
  ASSERT_EQ(rep.size(), 4u);  // EXPORT, BLOCK_SIZE, DESCRIPTION (999 ignored), ACK
  EXPECT_EQ(rep[0].type, kRepInfo);
  ASSERT_EQ(rep[0].data.size(), 12u);
  EXPECT_EQ(get16(rep[0].data.data()), kInfoExport);
  EXPECT_EQ(get64(rep[0].data.data() + 2), 1u << 30);
  EXPECT_EQ(get16(rep[0].data.data() + 10), kTxHasFlags | kTxSendFlush | kTxSendFua | kTxSendTrim);
  ASSERT_EQ(rep[1].data.size(), 14u);
  EXPECT_EQ(get32(rep[1].data.data() + 2), 512u);
  EXPECT_EQ(get32(rep[1].data.data() + 6), 4096u);
  EXPECT_EQ(get32(rep[1].data.data() + 10), kMaxPayload);
  EXPECT_EQ(rep[2].data.substr(2), "the first");
  EXPECT_EQ(rep[3].type, kRepAck);
  EXPECT_EQ(r.h.state(), Handshake::State::transmission);
  EXPECT_EQ(r.h.selected()->name, "disk");
}

TEST(NbdHandshake, InfoKeepsHagglingAndEmptyNameIsTheFirstExport) {
  HandshakeConfig c = two_exports();
  Client r(c);
  r.feed(option(kOptInfo, go_data("")) + option(kOptGo, go_data("ro")));
  const auto rep = replies(r.out);
  ASSERT_EQ(rep.size(), 4u);
  EXPECT_EQ(rep[0].opt, kOptInfo);
  EXPECT_EQ(get64(rep[0].data.data() + 2), 1u << 30);  // "" is "disk"
  EXPECT_EQ(rep[2].opt, kOptGo);
  EXPECT_EQ(r.h.selected()->name, "ro");
  EXPECT_EQ(r.h.tx_flags(), kTxHasFlags | kTxReadOnly);
}

TEST(NbdHandshake, RefusedOptionsKeepSync) {
  HandshakeConfig c = two_exports();
  Client r(c);
  std::string bad_go = go_data("disk");
  bad_go.push_back('x');  // a byte more than the lengths say
  r.feed(option(77) + option(kOptGo, bad_go) + option(kOptInfo, go_data("nope")) + option(kOptList, "junk") +
         option(kOptStartTls) + option(kOptStructuredReply, "x") + option(kOptList));
  const auto rep = replies(r.out);
  ASSERT_GE(rep.size(), 7u);
  EXPECT_EQ(rep[0].type, kRepErrUnsup);
  EXPECT_EQ(rep[1].type, kRepErrInvalid);
  EXPECT_EQ(rep[2].type, kRepErrUnknown);
  EXPECT_EQ(rep[3].type, kRepErrInvalid);
  EXPECT_EQ(rep[4].type, kRepErrUnsup);  // STARTTLS without TLS: never ERR_TLS_REQD
  EXPECT_EQ(rep[5].type, kRepErrInvalid);
  EXPECT_EQ(rep[6].type, kRepServer);  // the LIST after all of them still works
  EXPECT_EQ(r.h.state(), Handshake::State::options);
}

TEST(NbdHandshake, ListNamesEveryExportWithItsDescription) {
  HandshakeConfig c = two_exports();
  Client r(c);
  r.feed(option(kOptList));
  const auto rep = replies(r.out);
  ASSERT_EQ(rep.size(), 3u);
  EXPECT_EQ(get32(rep[0].data.data()), 4u);
  EXPECT_EQ(rep[0].data.substr(4), "diskthe first");
  EXPECT_EQ(rep[1].data.substr(4), "ro");
  EXPECT_EQ(rep[2].type, kRepAck);
}

TEST(NbdHandshake, OversizedOptionIsSkippedUnreadThenAnsweredTooBig) {
  HandshakeConfig c = two_exports();
  Client r(c);
  std::string big;
  put64(&big, kOptMagic);
  put32(&big, kOptInfo);
  put32(&big, 1 << 20);
  EXPECT_EQ(r.feed(big), big.size());  // the header only; nothing buffered
  std::string chunk(64 * 1024, 'z');
  for (int i = 0; i < 16; i++) EXPECT_EQ(r.feed(chunk), chunk.size());
  r.feed(option(kOptList));
  const auto rep = replies(r.out);
  ASSERT_GE(rep.size(), 1u);
  EXPECT_EQ(rep[0].type, kRepErrTooBig);
  EXPECT_EQ(rep[1].type, kRepServer);
}

TEST(NbdHandshake, ByteAtATimeReachesTransmission) {
  HandshakeConfig c = two_exports();
  Handshake h(c);
  const std::string in = test::client_flags(kClientFixedNewstyle) + option(kOptStructuredReply) +
                         option(kOptGo, go_data("disk", {kInfoBlockSize}));
  std::string pending, out;
  for (char ch : in) {
    pending.push_back(ch);
    pending.erase(0, h.consume(pending, &out));
  }
  EXPECT_TRUE(pending.empty());
  EXPECT_EQ(h.state(), Handshake::State::transmission);
  EXPECT_TRUE(h.structured());
  EXPECT_TRUE(h.tx_flags() & kTxSendDf);  // DF only with structured replies
}

TEST(NbdHandshake, ExportNameRepliesSizeAndFlagsOrCloses) {
  HandshakeConfig c = two_exports();
  Client zeroes(c, kClientFixedNewstyle);
  zeroes.feed(option(kOptExportName, "ro"));
  ASSERT_EQ(zeroes.out.size(), 8u + 2 + 124);
  EXPECT_EQ(get64(zeroes.out.data()), 4096u);
  EXPECT_EQ(zeroes.h.state(), Handshake::State::transmission);
  Client nz(c);
  nz.feed(option(kOptExportName, "disk"));
  EXPECT_EQ(nz.out.size(), 10u);  // NO_ZEROES agreed
  Client unknown(c);
  unknown.feed(option(kOptExportName, "nope"));
  EXPECT_EQ(unknown.h.state(), Handshake::State::closed);
  EXPECT_TRUE(unknown.out.empty());
}

TEST(NbdHandshake, TlsRequiredRefusesEverythingButStartTlsAndAbort) {
  HandshakeConfig c = two_exports();
  c.tls = TlsMode::require;
  Client r(c);
  r.feed(option(kOptList) + option(kOptGo, go_data("disk")) + option(kOptStartTls));
  auto rep = replies(r.out);
  ASSERT_EQ(rep.size(), 3u);
  EXPECT_EQ(rep[0].type, kRepErrTlsReqd);
  EXPECT_EQ(rep[1].type, kRepErrTlsReqd);
  EXPECT_EQ(rep[2].type, kRepAck);
  EXPECT_EQ(r.h.state(), Handshake::State::start_tls);
  EXPECT_EQ(r.feed(option(kOptList)), 0u);  // TLS bytes now: not the handshake's
  r.h.tls_started();
  r.out.clear();
  r.feed(option(kOptStartTls) + option(kOptList));
  rep = replies(r.out);
  EXPECT_EQ(rep[0].type, kRepErrInvalid);  // a second STARTTLS
  EXPECT_EQ(rep[1].type, kRepServer);
  Client plain(c);
  plain.feed(option(kOptExportName, "disk"));
  EXPECT_EQ(plain.h.state(), Handshake::State::closed);
  EXPECT_TRUE(plain.out.empty());  // no size, no flags to a plaintext client
}

// What was agreed before STARTTLS could have been injected by a man in the
// middle: it does not survive into TLS.
TEST(NbdHandshake, StartTlsForgetsWhatWasAgreedInPlaintext) {
  HandshakeConfig c = two_exports();
  c.tls = TlsMode::on;
  Client r(c);
  r.feed(option(kOptStructuredReply) + option(kOptStartTls));
  EXPECT_TRUE(r.h.structured());
  ASSERT_EQ(r.h.state(), Handshake::State::start_tls);
  r.h.tls_started();
  EXPECT_TRUE(r.h.tls_active());
  EXPECT_FALSE(r.h.structured());
  r.out.clear();
  r.feed(option(kOptStructuredReply));  // not "repeated": negotiated afresh
  auto rep = replies(r.out);
  ASSERT_EQ(rep.size(), 1u);
  EXPECT_EQ(rep[0].type, kRepAck);
}

TEST(NbdHandshake, BaseAllocationNeedsStructuredRepliesAndTheSameExport) {
  HandshakeConfig c = two_exports();
  Client r(c);
  r.feed(option(kOptSetMetaContext, meta_data("disk", {"base:allocation"})));
  EXPECT_EQ(replies(r.out)[0].type, kRepErrInvalid);
  r.out.clear();
  r.feed(option(kOptStructuredReply) + option(kOptListMetaContext, meta_data("disk", {"base:"})) +
         option(kOptSetMetaContext, meta_data("disk", {"qemu:dirty-bitmap:x", "base:allocation"})) +
         option(kOptGo, go_data("disk")));
  const auto rep = replies(r.out);
  ASSERT_EQ(rep.size(), 7u);
  EXPECT_EQ(rep[1].type, kRepMetaContext);
  EXPECT_EQ(rep[1].data.substr(4), "base:allocation");
  EXPECT_EQ(rep[3].type, kRepMetaContext);
  EXPECT_EQ(get32(rep[3].data.data()), kBaseAllocationId);
  EXPECT_TRUE(r.h.base_allocation());
  Client other(c);
  other.feed(option(kOptStructuredReply) + option(kOptSetMetaContext, meta_data("disk", {"base:allocation"})) +
             option(kOptGo, go_data("ro")));
  EXPECT_FALSE(other.h.base_allocation());  // set for another export
}

TEST(NbdHandshake, AbortAcksAndBadMagicCloses) {
  HandshakeConfig c = two_exports();
  Client r(c);
  r.feed(option(kOptAbort));
  EXPECT_EQ(replies(r.out)[0].type, kRepAck);
  EXPECT_EQ(r.h.state(), Handshake::State::closed);
  Client bad(c);
  bad.feed(std::string(16, 'x'));
  EXPECT_EQ(bad.h.state(), Handshake::State::closed);
}

TEST(NbdHandshake, ShuttingDownRefusesOptions) {
  HandshakeConfig c = two_exports();
  c.shutting_down = true;
  Client r(c);
  r.feed(option(kOptGo, go_data("disk")));
  EXPECT_EQ(replies(r.out)[0].type, kRepErrShutdown);
  EXPECT_EQ(r.h.state(), Handshake::State::options);
}

}  // namespace
}  // namespace blkmq::nbd

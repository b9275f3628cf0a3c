// Transmission-phase codec: request headers, reply encodings, and the
// spec's error for each kind of bad request.
#include <gtest/gtest.h>

#include "nbd/protocol.h"
#include "nbd/wire.h"

namespace blkmq::nbd {
namespace {

Request req(uint16_t type, uint64_t off, uint32_t len, uint16_t flags = 0) {
  Request r;
  r.type = type;
  r.offset = off;
  r.length = len;
  r.flags = flags;
  r.cookie = 0x1122334455667788ull;
  return r;
}

TEST(NbdProtocol, RequestRoundTripAndBadMagic) {
  const Request r = req(kCmdWrite, 1 << 20, 4096, kCmdFlagFua);
  const std::string wire = encode_request(r);
  ASSERT_EQ(wire.size(), kRequestSize);
  Request back;
  ASSERT_TRUE(parse_request(wire, &back));
  EXPECT_EQ(back.type, kCmdWrite);
  EXPECT_EQ(back.flags, kCmdFlagFua);
  EXPECT_EQ(back.cookie, r.cookie);
  EXPECT_EQ(back.offset, 1u << 20);
  EXPECT_EQ(back.length, 4096u);
  EXPECT_EQ(request_payload(back), 4096u);
  std::string bad = wire;
  bad[0] ^= 1;
  EXPECT_FALSE(parse_request(bad, &back));
  EXPECT_FALSE(parse_request(wire.substr(0, 27), &back));
}

TEST(NbdProtocol, RepliesHaveTheSpecsLayout) {
  const std::string s = simple_reply(7, kErrInval);
  ASSERT_EQ(s.size(), kSimpleReplySize);
  EXPECT_EQ(get32(s.data()), kSimpleReplyMagic);
  EXPECT_EQ(get32(s.data() + 4), kErrInval);
  EXPECT_EQ(get64(s.data() + 8), 7u);
  const std::string d = offset_data_chunk(9, 4096, 512, true);
  ASSERT_EQ(d.size(), kChunkHeaderSize + 8);
  EXPECT_EQ(get32(d.data()), kStructuredReplyMagic);
  EXPECT_EQ(get16(d.data() + 4), kChunkFlagDone);
  EXPECT_EQ(get16(d.data() + 6), kChunkOffsetData);
  EXPECT_EQ(get32(d.data() + 16), 8u + 512);
  EXPECT_EQ(get64(d.data() + 20), 4096u);
  const std::string e = error_chunk(9, kErrIo, "media error");
  EXPECT_EQ(get16(e.data() + 6), kChunkError);
  EXPECT_EQ(get32(e.data() + 16), 6u + 11);
  EXPECT_EQ(get32(e.data() + 20), kErrIo);
  EXPECT_EQ(e.substr(26), "media error");
  const std::string h = offset_hole_chunk(9, 0, 65536, false);
  EXPECT_EQ(get16(h.data() + 4), 0u);
  EXPECT_EQ(get32(h.data() + 28), 65536u);
  EXPECT_EQ(done_chunk(3).size(), kChunkHeaderSize);
}

TEST(NbdProtocol, BlockStatusChunkLayout) {
  const std::string s = block_status_chunk(9, 1, {{4096, kStateHole | kStateZero}, {512, 0}}, true);
  ASSERT_EQ(s.size(), kChunkHeaderSize + 4 + 16);
  EXPECT_EQ(get32(s.data()), kStructuredReplyMagic);
  EXPECT_EQ(get16(s.data() + 4), kChunkFlagDone);
  EXPECT_EQ(get16(s.data() + 6), kChunkBlockStatus);
  EXPECT_EQ(get64(s.data() + 8), 9u);
  EXPECT_EQ(get32(s.data() + 16), 4u + 16u);
  EXPECT_EQ(get32(s.data() + 20), 1u);  // context id
  EXPECT_EQ(get32(s.data() + 24), 4096u);
  EXPECT_EQ(get32(s.data() + 28), 3u);
  EXPECT_EQ(get32(s.data() + 32), 512u);
  EXPECT_EQ(get32(s.data() + 36), 0u);
  EXPECT_EQ(get16(block_status_chunk(9, 1, {{512, 0}}, false).data() + 4), 0);
}

TEST(NbdProtocol, BlockStatusNeedsAMetaContextAndReqOneIsItsOwn) {
  ExportLimits lim;
  lim.size = 1 << 20;
  lim.structured = true;
  EXPECT_EQ(validate_request(req(kCmdBlockStatus, 0, 4096), lim), kErrInval);
  lim.meta_context = true;
  EXPECT_EQ(validate_request(req(kCmdBlockStatus, 0, 4096, kCmdFlagReqOne), lim), 0u);
  EXPECT_EQ(validate_request(req(kCmdRead, 0, 4096, kCmdFlagReqOne), lim), kErrInval);
  EXPECT_EQ(validate_request(req(kCmdBlockStatus, 1 << 20, 4096), lim), kErrInval);  // past the end
}

TEST(NbdProtocol, EachBadRequestGetsTheSpecsError) {
  ExportLimits lim;
  lim.size = 1 << 20;
  lim.min_block = 512;
  EXPECT_EQ(validate_request(req(kCmdRead, 0, 4096), lim), 0u);
  EXPECT_EQ(validate_request(req(kCmdRead, lim.size - 512, 1024), lim), kErrInval);     // read past the end
  EXPECT_EQ(validate_request(req(kCmdWrite, lim.size - 512, 1024), lim), kErrNoSpc);    // write past the end
  EXPECT_EQ(validate_request(req(kCmdWriteZeroes, lim.size, 512), lim), kErrNoSpc);
  EXPECT_EQ(validate_request(req(kCmdTrim, ~0ull - 100, 512), lim), kErrInval);         // no overflow
  EXPECT_EQ(validate_request(req(kCmdRead, 100, 512), lim), kErrInval);                 // unaligned
  EXPECT_EQ(validate_request(req(kCmdRead, 0, 0), lim), kErrInval);                     // zero length
  EXPECT_EQ(validate_request(req(9, 0, 512), lim), kErrInval);                          // unknown command
  EXPECT_EQ(validate_request(req(kCmdRead, 0, 512, 1 << 7), lim), kErrInval);           // unknown flag
  EXPECT_EQ(validate_request(req(kCmdWrite, 0, 512, kCmdFlagDf), lim), kErrInval);      // DF on a write
  EXPECT_EQ(validate_request(req(kCmdRead, 0, 512, kCmdFlagDf), lim), kErrInval);       // DF, not structured
  EXPECT_EQ(validate_request(req(kCmdRead, 0, 512, kCmdFlagFua), lim), 0u);             // FUA on every command
  EXPECT_EQ(validate_request(req(kCmdFlush, 0, 0, kCmdFlagFua), lim), 0u);
  EXPECT_EQ(validate_request(req(kCmdFlush, 0, 512), lim), kErrInval);
  EXPECT_EQ(validate_request(req(kCmdBlockStatus, 0, 512), lim), kErrInval);            // no meta context
  EXPECT_EQ(validate_request(req(kCmdDisc, 5, 5), lim), 0u);
  lim.size = 1ull << 40;
  EXPECT_EQ(validate_request(req(kCmdRead, 0, kMaxPayload + 512), lim), kErrOverflow);  // payload too big
  EXPECT_EQ(validate_request(req(kCmdWriteZeroes, 0, 128u << 20), lim), 0u);            // zeroes may be longer
  lim.fast_zero = false;
  EXPECT_EQ(validate_request(req(kCmdWriteZeroes, 0, 512, kCmdFlagFastZero), lim), kErrInval);
  lim.trim = false;
  EXPECT_EQ(validate_request(req(kCmdTrim, 0, 512), lim), kErrInval);  // not advertised
  lim.trim = true;
  lim.read_only = true;
  EXPECT_EQ(validate_request(req(kCmdWrite, 0, 512), lim), kErrPerm);
  EXPECT_EQ(validate_request(req(kCmdTrim, 0, 512), lim), kErrPerm);
  EXPECT_EQ(validate_request(req(kCmdRead, 0, 512), lim), 0u);
  lim.shutting_down = true;
  EXPECT_EQ(validate_request(req(kCmdRead, 0, 512), lim), kErrShutdown);
}

}  // namespace
}  // namespace blkmq::nbd

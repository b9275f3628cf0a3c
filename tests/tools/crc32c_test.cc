#include "bench/crc32c.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "bench/randmap.h"
#include "bench/verify.h"

namespace bench {
namespace {

TEST(Crc32c, KnownVectors) {
  const char* s = "123456789";
  EXPECT_EQ(crc32c(0, s, 9), 0xe3069283u);
  EXPECT_EQ(crc32c_sw(0, s, 9), 0xe3069283u);
  std::vector<uint8_t> zeros(32, 0), ones(32, 0xff), inc(32);
  for (int i = 0; i < 32; ++i) inc[i] = static_cast<uint8_t>(i);
  // RFC 3720 (iSCSI) test vectors.
  EXPECT_EQ(crc32c(0, zeros.data(), 32), 0x8a9136aau);
  EXPECT_EQ(crc32c(0, ones.data(), 32), 0x62a8ab43u);
  EXPECT_EQ(crc32c(0, inc.data(), 32), 0x46dd794eu);
  EXPECT_EQ(crc32c(0, "", 0), 0u);
}

TEST(Crc32c, HardwareMatchesTablesAndChains) {
  SplitMix64 r(1);
  std::vector<uint8_t> buf(10000);
  for (auto& b : buf) b = static_cast<uint8_t>(r.next());
  for (size_t len : {0, 1, 7, 8, 9, 63, 64, 4095, 4096, 10000}) {
    EXPECT_EQ(crc32c(0, buf.data(), len), crc32c_sw(0, buf.data(), len)) << len;
    // Continuing a CRC over a split buffer equals one pass.
    size_t half = len / 3;
    EXPECT_EQ(crc32c(crc32c(0, buf.data(), half), buf.data() + half, len - half), crc32c(0, buf.data(), len));
  }
}

TEST(Verify, FillThenCheck) {
  std::vector<uint8_t> blk(4096);
  verify_fill(blk.data(), 4096, 8192, 99);
  std::string why;
  EXPECT_TRUE(verify_check(blk.data(), 4096, 8192, &why)) << why;
}

TEST(Verify, DetectsCorruptionWithOffset) {
  std::vector<uint8_t> blk(4096);
  verify_fill(blk.data(), 4096, 1 << 20, 5);
  blk[1000] ^= 1;
  std::string why;
  EXPECT_FALSE(verify_check(blk.data(), 4096, 1 << 20, &why));
  EXPECT_NE(why.find("crc32c mismatch at offset 1048576"), std::string::npos) << why;
}

TEST(Verify, DetectsMisplacedAndUnwrittenBlocks) {
  std::vector<uint8_t> blk(4096);
  verify_fill(blk.data(), 4096, 4096, 5);
  std::string why;
  EXPECT_FALSE(verify_check(blk.data(), 4096, 0, &why));
  EXPECT_NE(why.find("offset 0"), std::string::npos) << why;
  std::memset(blk.data(), 0, blk.size());
  EXPECT_FALSE(verify_check(blk.data(), 4096, 4096, &why));
  EXPECT_NE(why.find("bad magic"), std::string::npos) << why;
}

TEST(Verify, OddBlockSizes) {
  for (uint32_t len : {512u, 1000u, 65536u}) {
    std::vector<uint8_t> blk(len);
    verify_fill(blk.data(), len, 512, 3);
    std::string why;
    EXPECT_TRUE(verify_check(blk.data(), len, 512, &why)) << len << why;
  }
}

}  // namespace
}  // namespace bench

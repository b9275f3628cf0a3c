// The one number/size/time parser (base/parse.h): every syntax, every
// bound, and the one message shape "NAME: 'VALUE' PROBLEM; expected ...".
#include "base/parse.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <string>

namespace blkmq::base {
namespace {

constexpr uint64_t kMax = UINT64_MAX;

template <typename T>
std::string error_of(const Result<T>& r) {
  if (r.ok()) return "<ok>";
  EXPECT_EQ(r.status().code(), EINVAL);
  return r.status().message();
}

TEST(ParseUint, AcceptsDecimalsWithinBounds) {
  EXPECT_EQ(*parse_uint("n", "0"), 0u);
  EXPECT_EQ(*parse_uint("n", "007"), 7u);
  EXPECT_EQ(*parse_uint("n", "18446744073709551615"), kMax);
  EXPECT_EQ(*parse_uint("n", "5", 5, 5), 5u);
  EXPECT_EQ(*parse_uint("n", "-0"), 0u);
}

TEST(ParseUint, RefusesWhatIsNotANumber) {
  for (const char* bad : {"", " 1", "1 ", "1\n", "+1", "0x10", "1e3", "1.0", "4kx", "4k", "abc", "-", "--1"}) {
    EXPECT_EQ(error_of(parse_uint("queue/nomerges", bad, 0, 2)),
              std::string("queue/nomerges: '") + bad + "' is not a number; expected an integer from 0 to 2")
        << bad;
  }
}

TEST(ParseUint, RefusesWhatIsOutOfRange) {
  for (const char* bad : {"3", "-1", "99999999999999999999", "18446744073709551616"}) {
    EXPECT_EQ(error_of(parse_uint("queue/nomerges", bad, 0, 2)),
              std::string("queue/nomerges: '") + bad + "' is out of range; expected an integer from 0 to 2")
        << bad;
  }
  EXPECT_EQ(error_of(parse_uint("x", "0", 1)), "x: '0' is out of range; expected an integer of at least 1");
  EXPECT_EQ(error_of(parse_uint("x", "0", 1, 9, "ms")),
            "x: '0' is out of range; expected an integer from 1 to 9 (ms)");
}

TEST(ParseInt, SignedBoundsAndExtremes) {
  EXPECT_EQ(*parse_int("n", "-1", -1, 1023), -1);
  EXPECT_EQ(*parse_int("n", "1023", -1, 1023), 1023);
  EXPECT_EQ(*parse_int("n", "-9223372036854775808", INT64_MIN, INT64_MAX), INT64_MIN);
  EXPECT_EQ(*parse_int("n", "9223372036854775807", INT64_MIN, INT64_MAX), INT64_MAX);
  EXPECT_EQ(error_of(parse_int("home_node", "-2", -1, 1023)),
            "home_node: '-2' is out of range; expected an integer from -1 to 1023");
  for (const char* over : {"9223372036854775808", "-9223372036854775809", "99999999999999999999"})
    EXPECT_NE(error_of(parse_int("n", over, INT64_MIN, INT64_MAX)).find("is out of range"), std::string::npos)
        << over;
  for (const char* bad : {"", "-", "+1", " 1", "1-", "1x"})
    EXPECT_NE(error_of(parse_int("n", bad, -5, 5)).find("is not a number"), std::string::npos) << bad;
}

TEST(ParseBool, EverySpellingAndNothingElse) {
  for (const char* t : {"1", "y", "Y", "yes", "YES", "true", "True", "on", "ON"})
    EXPECT_TRUE(*parse_bool("b", t)) << t;
  for (const char* f : {"0", "n", "N", "no", "false", "FALSE", "off", "Off"})
    EXPECT_FALSE(*parse_bool("b", f)) << f;
  for (const char* bad : {"", "2", "-1", "yes ", " 1", "t", "f", "enable", "10"}) {
    EXPECT_EQ(error_of(parse_bool("--hipri", bad)),
              std::string("--hipri: '") + bad +
                  "' is not a boolean; expected 1 or 0 (also y/n, yes/no, true/false, on/off)")
        << bad;
  }
}

TEST(ParseSize, FioSuffixesArePowersOf1024) {
  const struct {
    const char* text;
    uint64_t bytes;
  } ok[] = {
      {"0", 0},           {"512", 512},         {"4096", 4096},       {"4096b", 4096},   {"4096B", 4096},
      {"4k", 4096},       {"4K", 4096},         {"4kb", 4096},        {"4KB", 4096},     {"4kB", 4096},
      {"4KiB", 4096},     {"4kib", 4096},       {"64m", 64 * kMiB},   {"64M", 64 * kMiB}, {"64MiB", 64 * kMiB},
      {"1g", kGiB},       {"2GB", 2 * kGiB},    {"1t", kTiB},         {"1P", kPiB},      {"1e", uint64_t{1} << 60},
      {"15e", 15 * (uint64_t{1} << 60)},        {"1048576k", kGiB},   {"18446744073709551615", kMax},
  };
  for (const auto& c : ok) {
    auto r = parse_size("size", c.text);
    ASSERT_TRUE(r) << c.text << ": " << r.status().message();
    EXPECT_EQ(*r, c.bytes) << c.text;
  }
}

TEST(ParseSize, RefusesMalformedSizes) {
  for (const char* bad : {"", "k", "b", "kb", "4x", "4kx", "4kbb", "4ki", "4KiBB", "4 k", " 4k", "4k ", "4k\n",
                          "-1", "-4k", "+4k", "1.5g", "0x10", "4bk", "4iB"}) {
    const std::string e = error_of(parse_size("--size", bad));
    EXPECT_EQ(e.rfind(std::string("--size: '") + bad + "' is not a size; expected a number of bytes, or one with a "
                      "suffix k, m, g, t, p or e (powers of 1024: 64m, 2g; b or ib may follow)", 0),
              0u)
        << bad << ": " << e;
  }
}

TEST(ParseSize, OverflowIsOutOfRange) {
  for (const char* big : {"99999999999999999999", "16e", "16384p", "18446744073709551616", "17179869184g"})
    EXPECT_NE(error_of(parse_size("size", big)).find("'" + std::string(big) + "' is out of range"), std::string::npos)
        << big;
}

TEST(ParseSize, BoundsMultipleAndZero) {
  const SizeRule rule{.bare_unit = 1, .lo = kMiB, .hi = kMax, .multiple = 512, .zero_ok = true};
  EXPECT_EQ(*parse_size("size", "0", rule), 0u);
  EXPECT_EQ(*parse_size("size", "0k", rule), 0u);
  EXPECT_EQ(*parse_size("size", "1m", rule), kMiB);
  EXPECT_EQ(error_of(parse_size("uring: parameter 'size'", "1024", rule)),
            "uring: parameter 'size': '1024' is out of range; expected a number of bytes, or one with a suffix k, "
            "m, g, t, p or e (powers of 1024: 64m, 2g; b or ib may follow), 0 or at least 1 MiB, a multiple of "
            "512 bytes");
  EXPECT_NE(error_of(parse_size("size", "1049000", rule)).find("'1049000' is not a multiple of 512 bytes"),
            std::string::npos);
  const SizeRule no_zero{.bare_unit = 1, .lo = 4096, .hi = 8192};
  EXPECT_NE(error_of(parse_size("bs", "0", no_zero)).find("is out of range"), std::string::npos);
  EXPECT_NE(error_of(parse_size("bs", "9k", no_zero)).find("from 4 KiB to 8 KiB"), std::string::npos);
  EXPECT_EQ(*parse_size("bs", "8k", no_zero), 8192u);
  EXPECT_NE(error_of(parse_size("align", "2t", SizeRule{.hi = kTiB})).find("b or ib may follow), at most 1 TiB"),
            std::string::npos);
}

// A caller whose bare numbers have always been MiB (null, as null_blk).
TEST(ParseSize, BareUnitAppliesOnlyWithoutASuffix) {
  const SizeRule mib{.bare_unit = kMiB, .lo = kMiB, .hi = 4 * kPiB, .multiple = kMiB};
  EXPECT_EQ(*parse_size("size", "1024", mib), kGiB);
  EXPECT_EQ(*parse_size("size", "64M", mib), 64 * kMiB);
  EXPECT_EQ(*parse_size("size", "1048576b", mib), kMiB);
  EXPECT_EQ(*parse_size("size", "4P", mib), 4 * kPiB);
  const std::string e = error_of(parse_size("null: parameter 'size'", "1536k", mib));
  EXPECT_EQ(e,
            "null: parameter 'size': '1536k' is not a multiple of 1 MiB; expected a number of MiB (1024 is 1 GiB), "
            "or one with a suffix k, m, g, t, p or e (powers of 1024: 64m, 2g; b or ib may follow), from 1 MiB to "
            "4 PiB, a multiple of 1 MiB");
  EXPECT_NE(error_of(parse_size("size", "4294967297", mib)).find("is out of range"), std::string::npos);
  EXPECT_NE(error_of(parse_size("size", "17592186044416", mib)).find("is out of range"), std::string::npos);
}

TEST(FormatSize, LargestUnitThatDivides) {
  EXPECT_EQ(format_size(0), "0 bytes");
  EXPECT_EQ(format_size(1), "1 byte");
  EXPECT_EQ(format_size(1000), "1000 bytes");
  EXPECT_EQ(format_size(4096), "4 KiB");
  EXPECT_EQ(format_size(1536 * kKiB), "1536 KiB");
  EXPECT_EQ(format_size(250 * kGiB), "250 GiB");
  EXPECT_EQ(format_size(4 * kPiB), "4 PiB");
  EXPECT_EQ(describe_size({}), "a number of bytes, or one with a suffix k, m, g, t, p or e (powers of 1024: 64m, "
                               "2g; b or ib may follow)");
}

TEST(ParseTime, UnitsAndBareSeconds) {
  const struct {
    const char* text;
    uint64_t ns;
  } ok[] = {
      {"5", 5 * kNsPerSec},       {"5s", 5 * kNsPerSec},    {"5sec", 5 * kNsPerSec},   {"5S", 5 * kNsPerSec},
      {"250ms", 250 * kNsPerMs},  {"250msec", 250 * kNsPerMs}, {"10us", 10 * kNsPerUs}, {"10usec", 10 * kNsPerUs},
      {"7ns", 7},                 {"7nsec", 7},             {"1m", 60 * kNsPerSec},    {"1min", 60 * kNsPerSec},
      {"1h", 3600 * kNsPerSec},   {"1hr", 3600 * kNsPerSec}, {"1hour", 3600 * kNsPerSec}, {"1d", 86400 * kNsPerSec},
      {"0", 0},                   {"0.5", kNsPerSec / 2},   {"1.25ms", 1250 * kNsPerUs}, {"0.001s", kNsPerMs},
  };
  for (const auto& c : ok) {
    auto r = parse_time_ns("--runtime", c.text);
    ASSERT_TRUE(r) << c.text << ": " << r.status().message();
    EXPECT_EQ(*r, c.ns) << c.text;
  }
}

TEST(ParseTime, RefusesMalformedAndOutOfRange) {
  for (const char* bad : {"", "s", "5q", "5 s", " 5", "5s ", "-1", "+1", "1.", ".5", "1.5.5", "5mss", "0x5", "1e3"}) {
    EXPECT_NE(error_of(parse_time_ns("--runtime", bad)).find("'" + std::string(bad) + "' is not a time; expected a "
                                                             "number of seconds, or one with a unit ns, us, ms"),
              std::string::npos)
        << bad;
  }
  EXPECT_NE(error_of(parse_time_ns("t", "99999999999999999999")).find("is out of range"), std::string::npos);
  EXPECT_NE(error_of(parse_time_ns("t", "213503982335d")).find("is out of range"), std::string::npos);
  EXPECT_NE(error_of(parse_time_ns("t", "0.5ns")).find("is not a whole number of nanoseconds"), std::string::npos);
  const TimeRule period{.bare_unit_ns = kNsPerMs, .lo_ns = kNsPerMs, .hi_ns = 86400 * kNsPerSec,
                        .resolution_ns = kNsPerMs};
  EXPECT_EQ(*parse_time_ns("@MS", "100", period), 100 * kNsPerMs);
  EXPECT_EQ(*parse_time_ns("@MS", "2s", period), 2 * kNsPerSec);
  EXPECT_EQ(error_of(parse_time_ns("@MS", "0", period)),
            "@MS: '0' is out of range; expected a number of milliseconds, or one with a unit ns, us, ms, s, m, h or "
            "d (250ms, 1.5s), from 1 ms to 1 d, in whole milliseconds");
  EXPECT_NE(error_of(parse_time_ns("@MS", "1500us", period)).find("is not a whole number of milliseconds"),
            std::string::npos);
  EXPECT_NE(error_of(parse_time_ns("@MS", "2d", period)).find("is out of range"), std::string::npos);
}

TEST(ParsePercent, IntegerWithOptionalPercentSign) {
  EXPECT_EQ(*parse_percent("--rwmixread", "70"), 70u);
  EXPECT_EQ(*parse_percent("--rwmixread", "70%"), 70u);
  EXPECT_EQ(*parse_percent("--rwmixread", "0%"), 0u);
  EXPECT_EQ(*parse_percent("scale", "1000000", 1, 1000000), 1000000u);
  EXPECT_EQ(error_of(parse_percent("--rwmixread", "101%")),
            "--rwmixread: '101%' is out of range; expected a percentage from 0 to 100");
  for (const char* bad : {"", "%", "50%%", "5 0", "-1%x", "fifty", "%50"})
    EXPECT_NE(error_of(parse_percent("p", bad)).find("is not a number"), std::string::npos) << bad;
  EXPECT_NE(error_of(parse_percent("p", "-1")).find("is out of range"), std::string::npos);
}

TEST(InvalidValue, OneShape) {
  const Status st = invalid_value("--rw", "sideways", "is not a mode", "read, write or randread");
  EXPECT_EQ(st.code(), EINVAL);
  EXPECT_EQ(st.message(), "--rw: 'sideways' is not a mode; expected read, write or randread");
}

}  // namespace
}  // namespace blkmq::base

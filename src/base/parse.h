// The one parser of numbers, booleans, sizes, times and percentages that
// every layer uses: queue attributes, scheduler tunables, driver
// parameters, and the bench, nbd and control commands. Each caller keeps
// its own name, bounds and units; the syntax and the error wording are
// the same everywhere:
//
//   NAME: 'VALUE' <what is wrong>; expected <what is accepted>
//
// e.g. "queue/nomerges: '3' is out of range; expected an integer from 0
// to 2". NAME is what the user typed the value for, as the caller spells
// it ("queue/nomerges", "--bs", "null: parameter 'size'").
//
// The syntax is strict: no sign on an unsigned value, no blanks, no
// trailing characters, decimal digits only. Callers that accept what
// `echo` writes (sysfs-like attributes) trim the value themselves.
//
// All functions: any thread, no shared state; they allocate only to build
// an error message (and format_size's/describe_size's result).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "base/clock.h"
#include "blkmq/status.h"

namespace blkmq::base {

constexpr uint64_t kKiB = uint64_t{1} << 10;
constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr uint64_t kTiB = uint64_t{1} << 40;
constexpr uint64_t kPiB = uint64_t{1} << 50;

// The error every parser here returns, for a caller's own checks that
// follow the same wording (a choice of names, a power of two):
// EINVAL "NAME: 'VALUE' PROBLEM; expected EXPECTED".
Status invalid_value(std::string_view name, std::string_view value, std::string_view problem,
                     std::string_view expected);

// A decimal integer in lo..hi. "-5" for an unsigned value and a number too
// large for 64 bits are "out of range", not "not a number". `unit` (e.g.
// "ms"), when given, follows the range in the message.
Result<uint64_t> parse_uint(std::string_view name, std::string_view value, uint64_t lo = 0,
                            uint64_t hi = std::numeric_limits<uint64_t>::max(), std::string_view unit = {});
Result<int64_t> parse_int(std::string_view name, std::string_view value, int64_t lo, int64_t hi,
                          std::string_view unit = {});

// A boolean, case-insensitively: 1, y, yes, true, on or 0, n, no, false,
// off. The union of the kernel's module-parameter spelling (1/y/true) and
// fio's (1/0, with yes/no and on/off that blkmq bench has always taken), so
// that one spelling works for every switch of every command.
Result<bool> parse_bool(std::string_view name, std::string_view value);

// How a size is read (the syntax is fio's, below). Defaults: bytes, any
// 64-bit value.
struct SizeRule {
  // What a number without a suffix counts: 1 (bytes, fio's rule) or a
  // larger unit a caller has always used (null's sizes are MiB, as
  // null_blk's). A power of 1024.
  uint64_t bare_unit = 1;
  uint64_t lo = 0;  // bytes
  uint64_t hi = std::numeric_limits<uint64_t>::max();
  // The value must be a whole number of these bytes (a block, a MiB).
  uint64_t multiple = 1;
  // 0 is accepted below lo: "not given, use the default" for parameters
  // whose 0 means that (a file's own size).
  bool zero_ok = false;
};

// A size: digits, then optionally one of k, m, g, t, p, e (case-insensitive;
// powers of 1024: 4k = 4096, as fio's default kb_base=1024), and after a
// suffix optionally "b" or "ib" with no change in meaning (4kb = 4KiB =
// 4k). A lone "b" after the digits means bytes whatever rule.bare_unit is.
// Note: fio itself reads "kib" as 1000 under its default kb_base (its
// "compatibility" reading); blkmq keeps the IEC meaning every caller here
// has always had, so 4KiB is 4096. Refused: fractions, signs, blanks,
// other letters, overflow, and values outside the rule.
Result<uint64_t> parse_size(std::string_view name, std::string_view value, const SizeRule& rule = {});

// What parse_size accepts under `rule`, in words, for --help and errors:
// "a number of bytes, or with a suffix k, m, g, t, p (powers of 1024: 64m,
// 2g), from 1 MiB to 4 PiB".
std::string describe_size(const SizeRule& rule);

// Bytes in the largest binary unit that divides them: "4 KiB", "250 GiB",
// "1000 bytes", "1 byte".
std::string format_size(uint64_t bytes);

// How a time is read. Defaults: seconds when bare (fio's rule), any value,
// to the nanosecond.
struct TimeRule {
  uint64_t bare_unit_ns = kNsPerSec;
  uint64_t lo_ns = 0;
  uint64_t hi_ns = std::numeric_limits<uint64_t>::max();
  // The value must be a whole number of these (1 ms for a period kept in
  // milliseconds).
  uint64_t resolution_ns = 1;
};

// A time in nanoseconds: a decimal number, optionally with a fraction
// ("0.5"), then optionally a unit, case-insensitive: ns/nsec, us/usec,
// ms/msec, s/sec, m/min, h/hr/hour, d (fio's, plus ns). Without a unit it
// counts rule.bare_unit_ns.
Result<uint64_t> parse_time_ns(std::string_view name, std::string_view value, const TimeRule& rule = {});

// A percentage: an integer in lo..hi, optionally followed by "%".
Result<unsigned> parse_percent(std::string_view name, std::string_view value, unsigned lo = 0,
                               unsigned hi = 100);

}  // namespace blkmq::base

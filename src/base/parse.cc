#include "base/parse.h"

#include <array>
#include <utility>

namespace blkmq::base {
namespace {

constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();

// The decimal digits at the start of a string: how many, their value, and
// whether that value passed 64 bits (then `value` is meaningless).
struct LeadingDigits {
  size_t len = 0;
  uint64_t value = 0;
  bool overflow = false;
};

LeadingDigits leading_digits(std::string_view s) {
  LeadingDigits d;
  for (; d.len < s.size() && s[d.len] >= '0' && s[d.len] <= '9'; d.len++) {
    const auto digit = static_cast<uint64_t>(s[d.len] - '0');
    if (d.value > (kU64Max - digit) / 10) d.overflow = true;
    d.value = d.value * 10 + digit;
  }
  return d;
}

char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); i++)
    if (ascii_lower(a[i]) != ascii_lower(b[i])) return false;
  return true;
}

// "an integer from LO to HI (UNIT)"; an upper bound that is the type's
// largest value is no bound worth stating.
template <typename T>
std::string integer_range(T lo, T hi, std::string_view unit) {
  std::string s = hi == std::numeric_limits<T>::max() ? "an integer of at least " + std::to_string(lo)
                                                      : "an integer from " + std::to_string(lo) + " to " +
                                                            std::to_string(hi);
  if (!unit.empty()) s += " (" + std::string(unit) + ")";
  return s;
}

// An optional '-' and digits, nothing else: the sign and the magnitude;
// ok is false when the text is not that.
struct SignedDigits {
  bool ok = false;
  bool negative = false;
  LeadingDigits digits;
};

SignedDigits signed_digits(std::string_view value) {
  SignedDigits s;
  s.negative = !value.empty() && value[0] == '-';
  const std::string_view rest = s.negative ? value.substr(1) : value;
  s.digits = leading_digits(rest);
  s.ok = s.digits.len > 0 && s.digits.len == rest.size();
  return s;
}

// An unsigned integer in lo..hi read from `digits`; `value` (what the user
// wrote, digits and all) and `expected` go into the message.
Result<uint64_t> read_uint(std::string_view name, std::string_view value, std::string_view digits, uint64_t lo,
                           uint64_t hi, std::string_view expected) {
  const SignedDigits s = signed_digits(digits);
  if (!s.ok) return invalid_value(name, value, "is not a number", expected);
  const uint64_t v = s.digits.value;
  if (s.digits.overflow || (s.negative && v != 0) || v < lo || v > hi)
    return invalid_value(name, value, "is out of range", expected);
  return v;
}

// Binary units from the largest, for sizes in words.
constexpr std::array<std::pair<uint64_t, const char*>, 6> kSizeUnits{{
    {uint64_t{1} << 60, "EiB"}, {kPiB, "PiB"}, {kTiB, "TiB"}, {kGiB, "GiB"}, {kMiB, "MiB"}, {kKiB, "KiB"}}};

// The suffix letters of a size, k = 2^10 onwards.
constexpr std::string_view kSizeSuffixes = "kmgtpe";

// The multiplier a size's text after its digits stands for; 0 when the
// text is no suffix parse_size knows.
uint64_t size_multiplier(std::string_view suffix, uint64_t bare_unit) {
  if (suffix.empty()) return bare_unit;
  if (iequals(suffix, "b")) return 1;
  const size_t at = kSizeSuffixes.find(ascii_lower(suffix[0]));
  const std::string_view tail = suffix.substr(1);
  if (at == std::string_view::npos) return 0;
  if (!tail.empty() && !iequals(tail, "b") && !iequals(tail, "ib")) return 0;
  return uint64_t{1} << (10 * (at + 1));
}

// Time units, each with what it multiplies (fio's names, and ns).
struct TimeUnit {
  const char* name;
  uint64_t ns;
};
constexpr TimeUnit kTimeUnits[] = {
    {"ns", 1},
    {"nsec", 1},
    {"us", kNsPerUs},
    {"usec", kNsPerUs},
    {"ms", kNsPerMs},
    {"msec", kNsPerMs},
    {"s", kNsPerSec},
    {"sec", kNsPerSec},
    {"m", 60 * kNsPerSec},
    {"min", 60 * kNsPerSec},
    {"h", 3600 * kNsPerSec},
    {"hr", 3600 * kNsPerSec},
    {"hour", 3600 * kNsPerSec},
    {"d", 86400 * kNsPerSec},
};

// The largest unit that divides ns, in words ("250 ms", "1 d").
std::string format_time(uint64_t ns) {
  static constexpr TimeUnit kLargestFirst[] = {{"d", 86400 * kNsPerSec}, {"h", 3600 * kNsPerSec},
                                               {"m", 60 * kNsPerSec},    {"s", kNsPerSec},
                                               {"ms", kNsPerMs},         {"us", kNsPerUs}};
  for (const TimeUnit& u : kLargestFirst)
    if (ns != 0 && ns % u.ns == 0) return std::to_string(ns / u.ns) + " " + u.name;
  return std::to_string(ns) + " ns";
}

std::string time_unit_words(uint64_t ns) {
  switch (ns) {
    case 1: return "nanoseconds";
    case kNsPerUs: return "microseconds";
    case kNsPerMs: return "milliseconds";
    case kNsPerSec: return "seconds";
    default: return "units of " + format_time(ns);
  }
}

std::string describe_time(const TimeRule& rule) {
  std::string s = "a number of " + time_unit_words(rule.bare_unit_ns) +
                  ", or one with a unit ns, us, ms, s, m, h or d (250ms, 1.5s)";
  if (rule.hi_ns != kU64Max) {
    s += ", from " + format_time(rule.lo_ns) + " to " + format_time(rule.hi_ns);
  } else if (rule.lo_ns > 0) {
    s += ", at least " + format_time(rule.lo_ns);
  }
  if (rule.resolution_ns > 1) s += ", in whole " + time_unit_words(rule.resolution_ns);
  return s;
}

// 10^n for n <= 19.
uint64_t power_of_ten(size_t n) {
  uint64_t p = 1;
  while (n--) p *= 10;
  return p;
}

enum class Scaled { ok, overflow, fractional };

// "12", "12.5", "0.25" times `mult` (not 0), which must come out whole:
// "0.5ns" is no number of nanoseconds. `fraction` is at most 18 digits.
Scaled scale_decimal(const LeadingDigits& whole, std::string_view fraction, uint64_t mult, uint64_t* out) {
  if (whole.overflow || whole.value > kU64Max / mult) return Scaled::overflow;
  uint64_t v = whole.value * mult;
  if (!fraction.empty()) {
    const LeadingDigits f = leading_digits(fraction);
    const unsigned __int128 scaled = static_cast<unsigned __int128>(f.value) * mult;
    const uint64_t den = power_of_ten(fraction.size());
    if (scaled % den != 0) return Scaled::fractional;
    const auto add = static_cast<uint64_t>(scaled / den);
    if (v > kU64Max - add) return Scaled::overflow;
    v += add;
  }
  *out = v;
  return Scaled::ok;
}

}  // namespace

Status invalid_value(std::string_view name, std::string_view value, std::string_view problem,
                     std::string_view expected) {
  std::string m(name);
  m += ": '";
  m += value;
  m += "' ";
  m += problem;
  m += "; expected ";
  m += expected;
  return Status::invalid(std::move(m));
}

Result<uint64_t> parse_uint(std::string_view name, std::string_view value, uint64_t lo, uint64_t hi,
                            std::string_view unit) {
  return read_uint(name, value, value, lo, hi, integer_range(lo, hi, unit));
}

Result<int64_t> parse_int(std::string_view name, std::string_view value, int64_t lo, int64_t hi,
                          std::string_view unit) {
  const std::string expected = integer_range(lo, hi, unit);
  const SignedDigits s = signed_digits(value);
  if (!s.ok) return invalid_value(name, value, "is not a number", expected);
  // The magnitude of INT64_MIN is one more than INT64_MAX.
  const uint64_t limit = static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) + (s.negative ? 1 : 0);
  if (s.digits.overflow || s.digits.value > limit) return invalid_value(name, value, "is out of range", expected);
  const int64_t v = s.negative ? static_cast<int64_t>(0 - s.digits.value) : static_cast<int64_t>(s.digits.value);
  if (v < lo || v > hi) return invalid_value(name, value, "is out of range", expected);
  return v;
}

Result<bool> parse_bool(std::string_view name, std::string_view value) {
  for (std::string_view t : {"1", "y", "yes", "true", "on"})
    if (iequals(value, t)) return true;
  for (std::string_view f : {"0", "n", "no", "false", "off"})
    if (iequals(value, f)) return false;
  return invalid_value(name, value, "is not a boolean", "1 or 0 (also y/n, yes/no, true/false, on/off)");
}

std::string format_size(uint64_t bytes) {
  for (const auto& [unit, unit_name] : kSizeUnits)
    if (bytes != 0 && bytes % unit == 0) return std::to_string(bytes / unit) + " " + unit_name;
  return std::to_string(bytes) + (bytes == 1 ? " byte" : " bytes");
}

std::string describe_size(const SizeRule& rule) {
  std::string s = "a number of ";
  if (rule.bare_unit == 1) {
    s += "bytes";
  } else {
    // "MiB (1024 is 1 GiB)": the unit's name, and what a round number means.
    const std::string one = format_size(rule.bare_unit);
    s += one.substr(one.find(' ') + 1) + " (1024 is " + format_size(rule.bare_unit * 1024) + ")";
  }
  s += ", or one with a suffix k, m, g, t, p or e (powers of 1024: 64m, 2g; b or ib may follow)";
  const std::string zero = rule.zero_ok && rule.lo > 0 ? "0 or " : "";
  if (rule.hi != kU64Max && rule.lo == 0) {
    s += ", at most " + format_size(rule.hi);
  } else if (rule.hi != kU64Max) {
    s += ", " + zero + "from " + format_size(rule.lo) + " to " + format_size(rule.hi);
  } else if (rule.lo > 0) {
    s += ", " + zero + "at least " + format_size(rule.lo);
  }
  if (rule.multiple > 1) s += ", a multiple of " + format_size(rule.multiple);
  return s;
}

Result<uint64_t> parse_size(std::string_view name, std::string_view value, const SizeRule& rule) {
  const LeadingDigits d = leading_digits(value);
  const uint64_t mult = size_multiplier(value.substr(d.len), rule.bare_unit);
  if (d.len == 0 || mult == 0) return invalid_value(name, value, "is not a size", describe_size(rule));
  if (d.overflow || d.value > kU64Max / mult) return invalid_value(name, value, "is out of range", describe_size(rule));
  const uint64_t bytes = d.value * mult;
  if (bytes == 0 && rule.zero_ok) return bytes;
  if (bytes < rule.lo || bytes > rule.hi) return invalid_value(name, value, "is out of range", describe_size(rule));
  if (rule.multiple > 1 && bytes % rule.multiple != 0)
    return invalid_value(name, value, "is not a multiple of " + format_size(rule.multiple), describe_size(rule));
  return bytes;
}

Result<uint64_t> parse_time_ns(std::string_view name, std::string_view value, const TimeRule& rule) {
  const LeadingDigits whole = leading_digits(value);
  size_t pos = whole.len;
  std::string_view fraction;
  if (pos < value.size() && value[pos] == '.') {
    fraction = value.substr(pos + 1, leading_digits(value.substr(pos + 1)).len);
    pos += 1 + fraction.size();
  }
  const std::string_view unit = value.substr(pos);
  uint64_t mult = unit.empty() ? rule.bare_unit_ns : 0;
  for (const TimeUnit& u : kTimeUnits)
    if (iequals(unit, u.name)) mult = u.ns;
  // A fraction needs digits on both sides of the point ("1.5", not "1."),
  // and at most 18 of them, so that 10^digits fits 64 bits.
  const bool point = pos > whole.len;
  if (whole.len == 0 || mult == 0 || (point && (fraction.empty() || fraction.size() > 18)))
    return invalid_value(name, value, "is not a time", describe_time(rule));
  uint64_t ns = 0;
  switch (scale_decimal(whole, fraction, mult, &ns)) {
    case Scaled::ok: break;
    case Scaled::overflow: return invalid_value(name, value, "is out of range", describe_time(rule));
    case Scaled::fractional:
      return invalid_value(name, value, "is not a whole number of nanoseconds", describe_time(rule));
  }
  if (ns < rule.lo_ns || ns > rule.hi_ns) return invalid_value(name, value, "is out of range", describe_time(rule));
  if (rule.resolution_ns > 1 && ns % rule.resolution_ns != 0)
    return invalid_value(name, value, "is not a whole number of " + time_unit_words(rule.resolution_ns),
                         describe_time(rule));
  return ns;
}

Result<unsigned> parse_percent(std::string_view name, std::string_view value, unsigned lo, unsigned hi) {
  std::string_view digits = value;
  if (!digits.empty() && digits.back() == '%') digits.remove_suffix(1);
  auto r = read_uint(name, value, digits, lo, hi,
                     "a percentage from " + std::to_string(lo) + " to " + std::to_string(hi));
  if (!r) return r.status();
  return static_cast<unsigned>(*r);
}

}  // namespace blkmq::base

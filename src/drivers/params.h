// Driver parameters: the parsing every driver shares. A driver lists its
// parameters in a table of ParamDef (name, default, help, how to apply a
// value); parse_params() applies create_device()'s NAME=VALUE map to the
// driver's parameter struct and param_infos() turns the table into the
// ParamInfo list the driver registers. Values are read through ParamValue,
// whose errors all read
//   "DRIVER: parameter 'NAME' must be ACCEPTED; got 'VALUE'".
#pragma once

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "blkmq/device.h"
#include "blkmq/status.h"

namespace blkmq::drvparam {

// Byte counts with binary suffixes. `suffixes` lists the accepted suffix
// letters in order, each 1024 times the one before ("kmgt": k = 2^10 ..
// t = 2^40); letters are case-insensitive. With `unit`, "B" or "iB" may
// follow a suffix ("2GB", "2GiB"). `accepted` is what an error message says
// the parameter must be.
struct SizeSyntax {
  std::string_view suffixes;
  bool unit;
  std::string_view accepted;
};

// Digits, then at most one suffix from `syntax` (and with syntax.unit an
// optional "B"/"iB" after it). False on anything else or on overflow.
bool parse_size(std::string_view s, const SizeSyntax& syntax, uint64_t* out);

// One NAME=VALUE being applied, with the driver's name for messages.
struct ParamValue {
  std::string_view driver;  // message prefix: "null", "uring", ...
  std::string_view name;
  std::string_view value;

  // "DRIVER: parameter 'NAME' must be ACCEPTED; got 'VALUE'".
  Status error(std::string_view accepted) const;

  // A decimal integer in lo..hi. A bad value is refused as "an integer in
  // lo..hi", or with `accepted` where the caller gives it.
  template <typename T>
  Status to_int(std::type_identity_t<T> lo, std::type_identity_t<T> hi, T* out,
                std::string_view accepted = {}) const {
    T v{};
    if (!read_int(&v) || v < lo || v > hi) {
      if (!accepted.empty()) return error(accepted);
      return error("an integer in " + std::to_string(lo) + ".." + std::to_string(hi));
    }
    *out = v;
    return Status::OK();
  }
  // Any value of an unsigned T ("an unsigned integer"); the range is for
  // the caller to check.
  template <typename T>
  Status to_uint(T* out) const {
    static_assert(std::is_unsigned_v<T>);
    T v{};
    if (!read_int(&v)) return error("an unsigned integer");
    *out = v;
    return Status::OK();
  }
  // A power of two in lo..hi (block sizes).
  Status to_power_of_two(unsigned lo, unsigned hi, unsigned* out) const;
  // 1/y/Y/true or 0/n/N/false, as the kernel's bool module parameters.
  Status to_bool(bool* out) const;
  // One of `names` exactly; *index is its position. Refused as "A, B or C".
  Status to_choice(std::initializer_list<std::string_view> names, size_t* index) const;
  // A byte count in `syntax`, refused as syntax.accepted.
  Status to_size(const SizeSyntax& syntax, uint64_t* out) const;

 private:
  template <typename T>
  bool read_int(T* v) const {
    auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), *v);
    return !value.empty() && ec == std::errc() && p == value.data() + value.size();
  }
};

// One parameter of a driver whose parsed form is P.
template <typename P>
struct ParamDef {
  const char* name;
  const char* default_value;  // as the parser accepts it
  const char* help;
  Status (*apply)(P& p, const ParamValue& v);
};

// "DRIVER: unknown parameter 'NAME' (known: a, b, c)".
Status unknown_param(std::string_view driver, std::string_view name,
                     const std::vector<std::string_view>& known);

// Whether `name` is a core parameter ("attr:PATH", applied by create_device
// as a queue attribute once the device exists), which drivers skip.
inline bool is_core_param(std::string_view name) { return name.starts_with("attr:"); }

// Applies every driver parameter of `params` to *p through `defs`: core
// parameters are skipped, unknown names and bad values refused.
template <typename P, size_t N>
Status parse_params(std::string_view driver, const ParamDef<P> (&defs)[N], const ParamMap& params,
                    P* p) {
  for (const auto& [name, value] : params) {
    if (is_core_param(name)) continue;
    const ParamDef<P>* def = nullptr;
    for (const ParamDef<P>& d : defs) {
      if (name == d.name) def = &d;
    }
    if (!def) {
      std::vector<std::string_view> known;
      for (const ParamDef<P>& d : defs) known.emplace_back(d.name);
      return unknown_param(driver, name, known);
    }
    if (Status st = def->apply(*p, ParamValue{driver, name, value}); !st) return st;
  }
  return Status::OK();
}

// One ParamInfo per table entry, in table order.
template <typename P, size_t N>
std::vector<ParamInfo> param_infos(const ParamDef<P> (&defs)[N]) {
  std::vector<ParamInfo> v;
  for (const ParamDef<P>& d : defs) v.push_back({d.name, d.default_value, d.help});
  return v;
}

// A request is whole blocks: refuses a max_sectors below one block of `bs`
// bytes ("DRIVER: parameter 'max_sectors' must be at least one block ..."),
// and rounds it down to whole blocks.
Status fit_max_sectors(std::string_view driver, unsigned bs, unsigned* max_sectors);

}  // namespace blkmq::drvparam

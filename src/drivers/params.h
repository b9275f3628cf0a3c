// Driver parameters: the parsing every driver shares. A driver lists its
// parameters in a table of ParamDef (name, default, help, how to apply a
// value); parse_params() applies create_device()'s NAME=VALUE map to the
// driver's parameter struct and param_infos() turns the table into the
// ParamInfo list the driver registers. Values are read through ParamValue
// with the project's one parser (base/parse.h), so every error reads
//   "DRIVER: parameter 'NAME': 'VALUE' <what is wrong>; expected <what is accepted>".
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "base/parse.h"
#include "blkmq/device.h"
#include "blkmq/status.h"

namespace blkmq::drvparam {

// The smallest capacity any driver accepts: null_blk's smallest (its sizes
// count MiB). Drivers whose bare numbers are bytes (fio's rule) refuse
// less, so that "size=1024" meant as 1 GiB (null's unit) is an error
// instead of a 1 KiB disk (issue 27).
constexpr uint64_t kMinCapacity = base::kMiB;

// A capacity in bytes when bare, at least kMinCapacity; with zero_ok, 0
// stays accepted as "not given" (a file's or a target's own size).
constexpr base::SizeRule byte_capacity(bool zero_ok) {
  return base::SizeRule{.bare_unit = 1, .lo = kMinCapacity, .zero_ok = zero_ok};
}

// One NAME=VALUE being applied, with the driver's name for messages.
struct ParamValue {
  std::string_view driver;  // message prefix: "null", "uring", ...
  std::string_view name;
  std::string_view value;

  // "DRIVER: parameter 'NAME'": what messages call the value.
  std::string label() const;
  // "LABEL: 'VALUE' is not accepted; expected EXPECTED", for checks of a
  // driver's own (a path that must not be empty).
  Status error(std::string_view expected) const;

  // A decimal integer in lo..hi; `note` (what the values mean) follows the
  // range in the message: "expected an integer from 0 to 2 (NOTE)".
  template <typename T>
  Status to_int(std::type_identity_t<T> lo, std::type_identity_t<T> hi, T* out, std::string_view note = {}) const {
    if constexpr (std::is_signed_v<T>) {
      auto r = base::parse_int(label(), value, lo, hi, note);
      if (!r) return r.status();
      *out = static_cast<T>(*r);
    } else {
      auto r = base::parse_uint(label(), value, lo, hi, note);
      if (!r) return r.status();
      *out = static_cast<T>(*r);
    }
    return Status::OK();
  }
  // Any value of an unsigned T; the range is for the caller to check.
  template <typename T>
  Status to_uint(T* out) const {
    static_assert(std::is_unsigned_v<T>);
    return to_int<T>(0, std::numeric_limits<T>::max(), out);
  }
  // A power of two in lo..hi (block sizes).
  Status to_power_of_two(unsigned lo, unsigned hi, unsigned* out) const;
  // A boolean in base::parse_bool's spelling (1/0, y/n, true/false, ...).
  Status to_bool(bool* out) const;
  // One of `names` exactly; *index is its position. Refused as "A, B or C".
  Status to_choice(std::initializer_list<std::string_view> names, size_t* index) const;
  // A size under `rule` (base::parse_size), in bytes.
  Status to_size(const base::SizeRule& rule, uint64_t* out) const;
};

// One parameter of a driver whose parsed form is P.
template <typename P>
struct ParamDef {
  const char* name;
  const char* default_value;  // as the parser accepts it
  const char* help;
  Status (*apply)(P& p, const ParamValue& v);
  // A size parameter's rule, the one `apply` reads it with: param_infos()
  // states it in the help, so --help and the error say the same.
  const base::SizeRule* size = nullptr;
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
  for (const ParamDef<P>& d : defs)
    v.push_back({d.name, d.default_value, d.size ? std::string(d.help) + "; " + base::describe_size(*d.size) : d.help});
  return v;
}

// A request is whole blocks: refuses a max_sectors below one block of `bs`
// bytes ("DRIVER: parameter 'max_sectors' must be at least one block ..."),
// and rounds it down to whole blocks.
Status fit_max_sectors(std::string_view driver, unsigned bs, unsigned* max_sectors);

}  // namespace blkmq::drvparam

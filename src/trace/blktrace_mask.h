// The text forms of a trace's filters, as the kernel's trace/ sysfs
// attributes read and write them (kernel/trace/blktrace.c): act_mask as a
// comma-separated list of category names or a number, start_lba, end_lba
// and pid as numbers. Internal (not installed): the engine's trace/
// attributes (src/core/trace.cc) and the tests use it.
#pragma once

#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>

#include "blkmq/status.h"
#include "trace/blktrace_format.h"

namespace blkmq::blktrace {

// The kernel's category names (its mask_maps), in bit order.
struct CategoryName {
  uint16_t bit;
  const char* name;
};
inline constexpr CategoryName kCategoryNames[] = {
    {kTcRead, "read"},       {kTcWrite, "write"},   {kTcFlush, "flush"},       {kTcSync, "sync"},
    {kTcQueue, "queue"},     {kTcRequeue, "requeue"}, {kTcIssue, "issue"},     {kTcComplete, "complete"},
    {kTcFs, "fs"},           {kTcPc, "pc"},         {kTcNotify, "notify"},     {kTcAhead, "ahead"},
    {kTcMeta, "meta"},       {kTcDiscard, "discard"}, {kTcDrvData, "drv_data"}, {kTcFua, "fua"},
};

// A number as the kernel's kstrtoull(s, 0) reads one: decimal, 0x... hex
// or 0... octal, with an optional leading '+'; nothing else around it.
inline bool parse_kernel_uint(std::string_view s, uint64_t* out) {
  if (!s.empty() && s[0] == '+') s.remove_prefix(1);
  unsigned base = 10;
  if (s.size() > 1 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    s.remove_prefix(2);
  } else if (s.size() > 1 && s[0] == '0') {
    base = 8;
    s.remove_prefix(1);
  }
  if (s.empty()) return false;
  uint64_t v = 0;
  for (char c : s) {
    const unsigned d = std::isdigit(static_cast<unsigned char>(c)) ? unsigned(c - '0')
                       : std::isxdigit(static_cast<unsigned char>(c))
                           ? unsigned(std::tolower(static_cast<unsigned char>(c)) - 'a' + 10)
                           : base;
    if (d >= base || v > (UINT64_MAX - d) / base) return false;
    v = v * base + d;
  }
  *out = v;
  return true;
}

// blk_trace_mask2str: the names of the mask's categories, comma-separated,
// in bit order; "" for an empty mask.
inline std::string act_mask_to_string(uint16_t mask) {
  std::string s;
  for (const CategoryName& c : kCategoryNames) {
    if (!(mask & c.bit)) continue;
    if (!s.empty()) s += ',';
    s += c.name;
  }
  return s;
}

// The act_mask attribute's input: a number (parse_kernel_uint), else a
// comma-separated list of names, any case, empty items skipped, as
// blk_trace_str2mask reads it ("" is the empty mask: nothing is traced).
// Unlike the kernel, which keeps the low 16 bits, a number above 0xffff is
// refused. `v` has no surrounding blanks.
inline Result<uint16_t> act_mask_from_string(std::string_view v) {
  const std::string what = "trace/act_mask";
  if (uint64_t n = 0; parse_kernel_uint(v, &n)) {
    if (n > kAllCategories)
      return Status::invalid(what + ": a mask is 16 bits (at most 0xffff), got '" + std::string(v) + "'");
    return static_cast<uint16_t>(n);
  }
  uint16_t mask = 0;
  while (true) {
    const size_t comma = v.find(',');
    const std::string_view item = v.substr(0, comma);
    if (!item.empty()) {
      bool found = false;
      for (const CategoryName& c : kCategoryNames) {
        const std::string_view name = c.name;
        bool same = item.size() == name.size();
        for (size_t i = 0; same && i < item.size(); i++)
          same = std::tolower(static_cast<unsigned char>(item[i])) == name[i];
        if (same) {
          mask |= c.bit;
          found = true;
          break;
        }
      }
      if (!found)
        return Status::invalid(what + ": unknown category '" + std::string(item) +
                               "'; expected a number or names separated by commas (no blanks) from: " +
                               act_mask_to_string(kAllCategories));
    }
    if (comma == std::string_view::npos) return mask;
    v.remove_prefix(comma + 1);
  }
}

}  // namespace blkmq::blktrace

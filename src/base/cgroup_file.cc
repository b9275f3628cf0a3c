#include "base/cgroup_file.h"

#include "base/parse.h"

namespace blkmq::base {

bool is_dev_number(std::string_view s) {
  const size_t colon = s.find(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == s.size()) return false;
  for (size_t i = 0; i < s.size(); i++)
    if (i != colon && (s[i] < '0' || s[i] > '9')) return false;
  return true;
}

std::string_view trim_blanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n')) s.remove_suffix(1);
  return s;
}

Result<WeightWrite> parse_weight_write(const std::string& name, std::string_view v, unsigned lo, unsigned hi) {
  v = trim_blanks(v);
  const size_t sp = v.find_first_of(" \t");
  const std::string_view first = v.substr(0, sp);
  const std::string_view rest = sp == std::string_view::npos ? std::string_view{} : trim_blanks(v.substr(sp));
  WeightWrite w;
  if (sp != std::string_view::npos && is_dev_number(first) && rest == "default") {
    w.kind = WeightWrite::kDeviceClear;
    return w;
  }
  if (sp != std::string_view::npos && first != "default" && !is_dev_number(first))
    return invalid_value(name, v, "is not understood", "N, 'default N' or 'MAJ:MIN N|default'");
  auto n = parse_uint(name, sp == std::string_view::npos ? v : rest, lo, hi);
  if (!n) return n.status();
  w.kind = sp != std::string_view::npos && first != "default" ? WeightWrite::kDevice : WeightWrite::kGroup;
  w.weight = static_cast<unsigned>(*n);
  return w;
}

}  // namespace blkmq::base

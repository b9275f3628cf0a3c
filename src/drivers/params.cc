#include "drivers/params.h"

#include "blkmq/bio.h"

namespace blkmq::drvparam {

bool parse_size(std::string_view s, const SizeSyntax& syntax, uint64_t* out) {
  size_t i = 0;
  uint64_t x = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
    const uint64_t d = static_cast<uint64_t>(s[i] - '0');
    if (x > (UINT64_MAX - d) / 10) return false;
    x = x * 10 + d;
    i++;
  }
  if (i == 0) return false;
  unsigned shift = 0;
  if (i < s.size()) {
    const char c = static_cast<char>(s[i] | 0x20);
    const size_t at = syntax.suffixes.find(c);
    if (c < 'a' || c > 'z' || at == std::string_view::npos) return false;
    shift = 10 * static_cast<unsigned>(at + 1);
    const std::string_view unit = s.substr(i + 1);
    if (!unit.empty() && !(syntax.unit && (unit == "B" || unit == "iB"))) return false;
  }
  if (shift && x > (UINT64_MAX >> shift)) return false;
  *out = x << shift;
  return true;
}

Status ParamValue::error(std::string_view accepted) const {
  return Status::invalid(std::string(driver) + ": parameter '" + std::string(name) + "' must be " +
                         std::string(accepted) + "; got '" + std::string(value) + "'");
}

Status ParamValue::to_power_of_two(unsigned lo, unsigned hi, unsigned* out) const {
  unsigned v = 0;
  if (!read_int(&v) || v < lo || v > hi || (v & (v - 1))) {
    return error("a power of two in " + std::to_string(lo) + ".." + std::to_string(hi));
  }
  *out = v;
  return Status::OK();
}

Status ParamValue::to_bool(bool* out) const {
  if (value == "1" || value == "y" || value == "Y" || value == "true") {
    *out = true;
  } else if (value == "0" || value == "n" || value == "N" || value == "false") {
    *out = false;
  } else {
    return error("0 or 1 (also y/n, true/false)");
  }
  return Status::OK();
}

Status ParamValue::to_choice(std::initializer_list<std::string_view> names, size_t* index) const {
  std::string accepted;
  size_t i = 0;
  for (std::string_view n : names) {
    if (n == value) {
      *index = i;
      return Status::OK();
    }
    if (i) accepted += (i + 1 == names.size()) ? " or " : ", ";
    accepted += n;
    i++;
  }
  return error(accepted);
}

Status ParamValue::to_size(const SizeSyntax& syntax, uint64_t* out) const {
  if (!parse_size(value, syntax, out)) return error(syntax.accepted);
  return Status::OK();
}

Status unknown_param(std::string_view driver, std::string_view name,
                     const std::vector<std::string_view>& known) {
  std::string list;
  for (std::string_view k : known) {
    if (!list.empty()) list += ", ";
    list += k;
  }
  return Status::invalid(std::string(driver) + ": unknown parameter '" + std::string(name) +
                         "' (known: " + list + ")");
}

Status fit_max_sectors(std::string_view driver, unsigned bs, unsigned* max_sectors) {
  const unsigned min_sectors = bs >> kSectorShift;
  if (*max_sectors < min_sectors) {
    return Status::invalid(std::string(driver) +
                           ": parameter 'max_sectors' must be at least one block (" +
                           std::to_string(min_sectors) + " sectors with bs=" + std::to_string(bs) +
                           "); got '" + std::to_string(*max_sectors) + "'");
  }
  *max_sectors -= *max_sectors % min_sectors;
  return Status::OK();
}

}  // namespace blkmq::drvparam

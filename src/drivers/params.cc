#include "drivers/params.h"

#include "blkmq/bio.h"

namespace blkmq::drvparam {

std::string ParamValue::label() const {
  return std::string(driver) + ": parameter '" + std::string(name) + "'";
}

Status ParamValue::error(std::string_view expected) const {
  return base::invalid_value(label(), value, "is not accepted", expected);
}

Status ParamValue::to_power_of_two(unsigned lo, unsigned hi, unsigned* out) const {
  const std::string expected = "a power of two from " + std::to_string(lo) + " to " + std::to_string(hi);
  auto r = base::parse_uint(label(), value);
  if (!r) return base::invalid_value(label(), value, "is not a number", expected);
  if (*r < lo || *r > hi) return base::invalid_value(label(), value, "is out of range", expected);
  if (*r & (*r - 1)) return base::invalid_value(label(), value, "is not a power of two", expected);
  *out = static_cast<unsigned>(*r);
  return Status::OK();
}

Status ParamValue::to_bool(bool* out) const {
  auto r = base::parse_bool(label(), value);
  if (!r) return r.status();
  *out = *r;
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
  return base::invalid_value(label(), value, "is not one of them", accepted);
}

Status ParamValue::to_size(const base::SizeRule& rule, uint64_t* out) const {
  auto r = base::parse_size(label(), value, rule);
  if (!r) return r.status();
  *out = *r;
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
    return base::invalid_value(std::string(driver) + ": parameter 'max_sectors'", std::to_string(*max_sectors),
                               "is less than one block",
                               "at least " + std::to_string(min_sectors) + " sectors with bs=" + std::to_string(bs));
  }
  *max_sectors -= *max_sectors % min_sectors;
  return Status::OK();
}

}  // namespace blkmq::drvparam

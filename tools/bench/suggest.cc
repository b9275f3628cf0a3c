#include "bench/suggest.h"

#include <algorithm>
#include <vector>

namespace bench {
namespace {

// Levenshtein distance, one row at a time.
size_t edits(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); j++) row[j] = j;
  for (size_t i = 1; i <= a.size(); i++) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); j++) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string nearest_option(const CLI::App& app, const std::string& typed) {
  std::string key = typed;
  key.erase(0, key.find_first_not_of('-'));
  if (const size_t eq = key.find('='); eq != std::string::npos) key.resize(eq);
  if (key.empty()) return "";
  std::string best;
  size_t best_d = 3;
  for (const CLI::Option* o : app.get_options()) {
    for (const std::string& name : o->get_lnames()) {
      const size_t d = edits(key, name);
      if (d < best_d && d * 2 < name.size()) {
        best_d = d;
        best = name;
      }
    }
  }
  return best;
}

std::string parse_error_message(const CLI::App& app, const CLI::ParseError& e) {
  std::string msg = e.what();
  // CLI11's wording for extras: "The following argument was not expected: X"
  // (or "arguments were", with several): suggest for the first.
  const size_t colon = msg.find("expected: ");
  if (colon == std::string::npos || msg.find("not expected") == std::string::npos) return msg;
  std::string first = msg.substr(colon + 10);
  first.resize(std::min(first.size(), first.find(' ')));
  const std::string near = nearest_option(app, first);
  if (!near.empty()) msg += " (did you mean --" + near + "?)";
  return msg;
}

}  // namespace bench

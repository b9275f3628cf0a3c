#include "reproduce/table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace repro {
namespace {

using json = nlohmann::ordered_json;

// A ratio this close to 1 is "no change" (run-to-run noise here is a few %).
constexpr double kNoEffect = 0.05;

std::string fmt_stat(const std::string& k, const Stat3& s) {
  if (s.n == 0) return "-";
  if (s.n == 1) return format_value(k, s.median);
  return format_value(k, s.median) + " [" + format_value(k, s.min) + "-" + format_value(k, s.max) + "]";
}

std::string fmt_ratio(double r) {
  if (r <= 0 || !std::isfinite(r)) return "-";
  char b[32];
  std::snprintf(b, sizeof b, "%.2f", r);
  return b;
}

std::string label_of(const std::string& k) {
  const MetricInfo m = metric_info(k);
  return m.label ? m.label : k;
}

// Left-aligns `s` in `w` columns; µ and other UTF-8 characters count once.
std::string pad(const std::string& s, size_t w) {
  size_t cols = 0;
  for (unsigned char c : s) cols += (c & 0xC0) != 0x80;
  return cols >= w ? s + " " : s + std::string(w - cols, ' ');
}

int direction(double ratio) { return ratio > 1 + kNoEffect ? 1 : ratio < 1 - kNoEffect ? -1 : 0; }

const SeedValue* seed_of(const RowDef& def, const std::string& k) {
  for (const SeedValue& v : def.seed)
    if (v.metric == k) return &v;
  return nullptr;
}

std::string compare_note(const RowDef& def, const MetricLine& l) {
  const int ours = direction(l.ratio), theirs = direction(l.seed_ratio);
  if (ours == theirs) return "";
  std::string what = ours == 0   ? "shows no effect"
                     : theirs == 0 ? "shows an effect the seed did not"
                                   : "goes the other way from the seed";
  std::string s = label_of(l.key) + " " + what + " (" + fmt_ratio(l.ratio) + " against " + fmt_ratio(l.seed_ratio) + ")";
  // Overlapping ranges: the rounds do not tell before and after apart.
  if (ours != 0 && l.before.min <= l.after.max && l.after.min <= l.before.max)
    s += ", within the run-to-run spread (the min-max ranges overlap)";
  return s + ": " + def.departure;
}

}  // namespace

Stat3 summarize(const std::vector<Sample>& runs, const std::string& k) {
  std::vector<double> v;
  for (const Sample& s : runs)
    if (auto it = s.find(k); it != s.end()) v.push_back(it->second);
  Stat3 st;
  st.n = static_cast<unsigned>(v.size());
  if (v.empty()) return st;
  std::sort(v.begin(), v.end());
  st.min = v.front();
  st.max = v.back();
  st.median = v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  return st;
}

RowSummary summarize_row(const RowDef& def, const RowResult& res) {
  RowSummary s;
  s.label = def.label;
  s.chart = def.chart;
  s.error = res.error;
  std::vector<std::string> keys = def.metrics;
  for (const char* k : {key::kCtxPerIo, key::kCpuUsPerIo})
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  for (const std::string& k : keys) {
    MetricLine l;
    l.key = k;
    l.before = summarize(res.before, k);
    l.after = summarize(res.after, k);
    if (l.before.n && l.after.n && l.before.median > 0) l.ratio = l.after.median / l.before.median;
    if (const SeedValue* sv = seed_of(def, k)) {
      l.has_seed = true;
      l.seed_before = sv->before;
      l.seed_after = sv->after;
      l.seed_ratio = sv->before > 0 ? sv->after / sv->before : 0;
    }
    if (s.note.empty() && l.has_seed && l.ratio > 0) s.note = compare_note(def, l);
    s.lines.push_back(l);
  }
  // Rows the seed published nothing for: the departure explains what they show.
  if (def.seed.empty() && !def.departure.empty()) s.note = def.departure;
  return s;
}

std::vector<RowSummary> summarize(const ExperimentResult& r) {
  std::vector<RowSummary> out;
  for (size_t i = 0; i < r.rows.size(); ++i) out.push_back(summarize_row(r.exp.rows[i], r.rows[i]));
  return out;
}

std::string format_machine(const Machine& m) {
  const std::string end = m.load_after.empty() ? "" : " " + m.load_after + " (end)";
  char b[512];
  std::snprintf(b, sizeof b, "machine: %u CPUs, %s; %s; memory %s; load average %s (start)%s\n", m.cpus,
                m.model.c_str(), m.kernel.c_str(), m.memory.c_str(), m.load_before.c_str(), end.c_str());
  return b;
}

std::string format_text(const ExperimentResult& r, const std::vector<RowSummary>& rows, unsigned rounds) {
  const Experiment& e = r.exp;
  std::string out = "\n== " + (e.id == "compare" ? std::string() : "seed " + e.id + ": ") + e.title + "\n";
  out += "   " + e.attr + ": before=" + e.before + ", after=" + e.after + "; " + std::to_string(rounds) +
         " rounds, interleaved; median [min-max]\n\n";
  bool seeded = false;  // without any seed numbers (--compare) the seed columns go
  for (const RowSummary& row : rows)
    for (const MetricLine& l : row.lines) seeded |= l.has_seed;
  auto line = [seeded](const std::string& a, const std::string& b, const std::string& c, const std::string& d,
                       const std::string& e2, const std::string& f, const std::string& g) {
    const std::string head = "  " + pad(a, 22) + pad(b, 28) + pad(c, 28);
    return seeded ? head + pad(d, 7) + pad(e2, 12) + pad(f, 12) + g + "\n" : head + d + "\n";
  };
  out += line("metric", "before", "after", "ratio", "seed before", "seed after", "seed ratio");
  for (const RowSummary& row : rows) {
    out += " " + row.label + "\n";
    if (!row.error.empty()) out += "    FAILED: " + row.error + "\n";
    for (const MetricLine& l : row.lines) {
      if (l.before.n == 0 && l.after.n == 0 && !l.has_seed) continue;
      out += line(label_of(l.key), fmt_stat(l.key, l.before), fmt_stat(l.key, l.after), fmt_ratio(l.ratio),
                  l.has_seed ? format_seed_value(l.key, l.seed_before) : "-",
                  l.has_seed ? format_seed_value(l.key, l.seed_after) : "-", l.has_seed ? fmt_ratio(l.seed_ratio) : "-");
    }
  }
  std::string notes;
  for (const std::string& n : e.notes) notes += "  - " + n + "\n";
  for (const RowSummary& row : rows)
    if (!row.note.empty()) notes += "  - " + row.label + ": " + row.note + "\n";
  return notes.empty() ? out : out + "\n  notes:\n" + notes;
}

std::string format_markdown(const ExperimentResult& r, const std::vector<RowSummary>& rows, unsigned rounds,
                            const std::string& chart_png) {
  const Experiment& e = r.exp;
  std::string out = "## Seed " + e.id + ": " + e.title + "\n\n`" + e.attr + "`: before = `" + e.before +
                    "`, after = `" + e.after + "`; " + std::to_string(rounds) +
                    " rounds, interleaved; median [min-max].\n\n";
  out += "| row | metric | before | after | after / before | seed before | seed after | seed ratio |\n";
  out += "|---|---|---|---|---|---|---|---|\n";
  for (const RowSummary& row : rows) {
    bool first = true;
    if (!row.error.empty()) out += "| " + row.label + " | **failed** | " + row.error + " | | | | | |\n";
    for (const MetricLine& l : row.lines) {
      if (l.before.n == 0 && l.after.n == 0 && !l.has_seed) continue;
      out += "| " + (first ? row.label : std::string()) + " | " + label_of(l.key) + " | " + fmt_stat(l.key, l.before) +
             " | " + fmt_stat(l.key, l.after) + " | " + fmt_ratio(l.ratio) + " | " +
             (l.has_seed ? format_seed_value(l.key, l.seed_before) : "-") + " | " +
             (l.has_seed ? format_seed_value(l.key, l.seed_after) : "-") + " | " +
             (l.has_seed ? fmt_ratio(l.seed_ratio) : "-") + " |\n";
      first = false;
    }
  }
  out += "\n";
  for (const std::string& n : e.notes) out += "- " + n + "\n";
  for (const RowSummary& row : rows)
    if (!row.note.empty()) out += "- *" + row.label + "*: " + row.note + "\n";
  if (!chart_png.empty()) out += "\n![seed " + e.id + ": after / before, ours and the seed's](" + chart_png + ")\n";
  return out + "\n";
}

json to_json(const Machine& m) {
  return {{"cpus", m.cpus}, {"model", m.model}, {"kernel", m.kernel}, {"memory", m.memory},
          {"load_before", m.load_before}, {"load_after", m.load_after}};
}

namespace {

json stat_json(const Stat3& s) { return {{"median", s.median}, {"min", s.min}, {"max", s.max}, {"n", s.n}}; }

json row_json(const RowDef& def, const RowResult& res, const RowSummary& sum) {
  json lines = json::array();
  for (const MetricLine& l : sum.lines) {
    json j = {{"metric", l.key}, {"before", stat_json(l.before)}, {"after", stat_json(l.after)}, {"ratio", l.ratio}};
    if (l.has_seed) j["seed"] = {{"before", l.seed_before}, {"after", l.seed_after}, {"ratio", l.seed_ratio}};
    lines.push_back(j);
  }
  return {{"label", def.label},
          {"args", def.args},
          {"error", res.error},
          {"note", sum.note},
          {"order", res.order},
          {"runs", {{"before", res.before}, {"after", res.after}}},
          {"summary", lines}};
}

}  // namespace

json to_json(const ExperimentResult& r, const std::vector<RowSummary>& rows) {
  json jr = json::array();
  for (size_t i = 0; i < rows.size(); ++i) jr.push_back(row_json(r.exp.rows[i], r.rows[i], rows[i]));
  return {{"seed", r.exp.id},     {"title", r.exp.title}, {"attr", r.exp.attr}, {"before", r.exp.before},
          {"after", r.exp.after}, {"common_args", r.exp.common}, {"notes", r.exp.notes}, {"rows", jr}};
}

}  // namespace repro

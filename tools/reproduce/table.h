// The tables of `blkmq reproduce`: medians with min-max per value, our
// after/before ratio beside the seed's, and the notes. Pure functions of the
// results: no device, no clock.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reproduce/interleave.h"

namespace repro {

// Median, min and max of one metric over the rounds; n = 0 when no run
// gave it. An even count's median is the mean of the middle two.
struct Stat3 {
  double median = 0, min = 0, max = 0;
  unsigned n = 0;
};
Stat3 summarize(const std::vector<Sample>& runs, const std::string& key);

struct MetricLine {
  std::string key;
  Stat3 before, after;
  double ratio = 0;          // after.median / before.median (0 if before is 0 or absent)
  bool has_seed = false;
  double seed_before = 0, seed_after = 0, seed_ratio = 0;
};

// What a row's runs add up to. Context switches and CPU per I/O are always
// among the lines (appended when the row did not name them).
struct RowSummary {
  std::string label;
  std::string chart;  // RowDef::chart
  std::vector<MetricLine> lines;
  std::string error;
  std::string note;  // set when a seeded ratio goes the other way (or shows no effect where the seed had one)
};

// Compares the row's primary seeded metric with the seed. `departure` of the
// row's definition explains a mismatch; it is quoted in the note.
RowSummary summarize_row(const RowDef& def, const RowResult& res);
std::vector<RowSummary> summarize(const ExperimentResult& r);

// The machine the results came from: printed above the tables.
struct Machine {
  unsigned cpus = 0;
  std::string model, kernel, memory, load_before, load_after;
};

// Plain text for stdout (aligned columns) and Markdown for REPORT.md. `rounds`
// is what was asked for; a row's n may be fewer if it failed.
std::string format_text(const ExperimentResult& r, const std::vector<RowSummary>& rows, unsigned rounds);
std::string format_markdown(const ExperimentResult& r, const std::vector<RowSummary>& rows, unsigned rounds,
                            const std::string& chart_png);
std::string format_machine(const Machine& m);

// results.json's entry for one experiment: the definition, every run's
// numbers in run order, and the summaries.
nlohmann::ordered_json to_json(const ExperimentResult& r, const std::vector<RowSummary>& rows);
nlohmann::ordered_json to_json(const Machine& m);

}  // namespace repro

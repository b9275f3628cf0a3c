// The four seed experiments of `blkmq reproduce`: for each seed in
// shared/seeds/, the attribute it flips, the blkmq bench rows that stand for
// its measurements, and the numbers the seed published. Data only; running
// them is interleave.h's job.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace repro {

// A number the seed's author published for one metric of a row.
struct SeedValue {
  std::string metric;  // a key of metrics.h
  double before = 0;
  double after = 0;
};

// One line of a seed's table: a bench configuration run with the
// attribute at its "before" and "after" value.
struct RowDef {
  std::string label;               // what the seed's row measured, and what stands for it here
  std::vector<std::string> args;   // blkmq bench arguments, without the seed's attribute
  std::vector<std::string> metrics;  // metric keys shown, the first is the chart's
  std::vector<SeedValue> seed;     // empty: the seed published none for this row
  // Why the row departs from the seed, shown in the notes when our ratio
  // goes the other way or misses the seed's by far (see table.h).
  std::string departure;
  // The chart's name for the row, short enough to read under its bars at
  // the PNG's size and unlike the others' (empty: the label up to ':').
  // Rows are brace-initialized without it and named later
  // (set_chart_names): the default initializer says so, and keeps
  // -Wmissing-field-initializers quiet about those rows.
  std::string chart = {};
};

struct Experiment {
  std::string id;           // "000"
  std::string title;        // the seed's subject line, shortened
  std::string attr;         // "queue/sched_insert_run"
  std::string before;       // the value standing for the kernel before the seed
  std::string after;        // the value standing for the seed applied
  std::vector<std::string> common;  // bench arguments of every row (both values)
  std::vector<RowDef> rows;
  std::vector<std::string> notes;   // what the set-up stands for; always printed
};

// How long and where the experiments run.
struct Scale {
  double runtime_s = 5;          // per run
  std::string scratch_dir;       // where seed 002's backing file lives (the root disk)
  uint64_t file_size = 1ull << 30;  // that file's size
};

// Seed 002's backing file, in Scale::scratch_dir (named apart from the
// seedNNN.* chart files, which share the results folder by default).
extern const char* const kSeed002File;

// The four experiments at the given scale, in seed order.
std::vector<Experiment> seed_experiments(const Scale& s);

// The bench arguments of one run: "bench", the experiment's common
// arguments, the row's, the attribute at `value`, and (when runtime_s > 0)
// --runtime and --time_based last, so they override a seed's own runtime.
std::vector<std::string> run_args(const Experiment& e, const RowDef& row, const std::string& value,
                                  double runtime_s);

}  // namespace repro

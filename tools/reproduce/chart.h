// One PNG chart per seed, drawn by gnuplot: for every seeded metric of every
// row, four bars normalised to the row's "before": ours before (1), ours
// after, the seed's before (1), the seed's after. Rows the seed published
// nothing for get ours only.
#pragma once

#include <string>
#include <vector>

#include "blkmq/status.h"
#include "reproduce/table.h"

namespace repro {

// The gnuplot data (one line per bar group: label, then the four values,
// "?" where missing). Pure; tested.
std::string chart_data(const std::vector<RowSummary>& rows);

// Writes seedNNN.dat and seedNNN.gp into `dir` and runs gnuplot on them,
// producing seedNNN.png; returns the PNG's file name. An error if gnuplot
// is missing or fails (the script and data stay, to be drawn by hand).
// Control thread; runs one gnuplot process.
blkmq::Result<std::string> draw_chart(const ExperimentResult& r, const std::vector<RowSummary>& rows,
                                      const std::string& dir);

}  // namespace repro

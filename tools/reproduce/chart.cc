#include "reproduce/chart.h"

#include <cerrno>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace repro {
namespace {

// gnuplot reads a quoted label as one column; the row's chart name, or
// its label up to ':' (cut at a word, with "..."), so bars stay readable.
std::string bar_label(const RowSummary& row, const std::string& k) {
  std::string r = !row.chart.empty() ? row.chart : row.label.substr(0, row.label.find(':'));
  if (r.size() > 34) {
    const size_t sp = r.rfind(' ', 31);
    r = r.substr(0, sp == std::string::npos || sp < 12 ? 31 : sp) + "...";
  }
  const MetricInfo m = metric_info(k);
  std::string s = r + " / " + (m.label ? m.label : k);
  for (char& c : s)
    if (c == '"') c = '\'';
  return s;
}

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4f", v);
  return b;
}

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::trunc);
  f << text;
  f.close();
  return static_cast<bool>(f);
}

std::string script(const ExperimentResult& r, const std::string& stem) {
  const Experiment& e = r.exp;
  std::string s;
  s += "set terminal pngcairo size 1200,640 font 'sans,10'\n";
  s += "set output '" + stem + ".png'\n";
  s += "set title \"seed " + e.id + ": " + e.attr + " " + e.before + " (before) vs " + e.after +
       " (after), normalised to each row's before\" noenhanced\n";
  s += "set datafile missing '?'\n";
  s += "set style data histograms\nset style histogram clustered gap 1\nset style fill solid 0.8 border -1\n";
  s += "set boxwidth 0.9\nset offsets 0, 0, graph 0.08, 0\nset grid ytics\nset yrange [0:*]\nset ylabel 'after / before'\n";
  s += "set xtics rotate by -25 left noenhanced\nset key top left\nset bmargin 9\nset rmargin 12\n";
  s += "plot '" + stem + ".dat' using 2:xtic(1) title 'blkmq before' lc rgb '#9ecae1', "
       "'' using 3 title 'blkmq after' lc rgb '#3182bd', '' using 4 title 'seed before' lc rgb '#fdae6b', "
       "'' using 5 title 'seed after' lc rgb '#e6550d'\n";
  return s;
}

}  // namespace

std::string chart_data(const std::vector<RowSummary>& rows) {
  std::string out = "# label  ours_before ours_after seed_before seed_after (each / its before)\n";
  for (const RowSummary& row : rows) {
    bool any_seed = false;
    for (const MetricLine& l : row.lines) any_seed |= l.has_seed;
    for (size_t i = 0; i < row.lines.size(); ++i) {
      const MetricLine& l = row.lines[i];
      // A row with seed numbers shows its seeded metrics; one without shows its primary metric.
      if (any_seed ? !l.has_seed : i != 0) continue;
      const bool ours = l.ratio > 0;
      out += "\"" + bar_label(row, l.key) + "\" " + (ours ? "1" : "?") + " " + (ours ? num(l.ratio) : "?") +
             " " + (l.has_seed ? "1" : "?") + " " + (l.has_seed ? num(l.seed_ratio) : "?") + "\n";
    }
  }
  return out;
}

blkmq::Result<std::string> draw_chart(const ExperimentResult& r, const std::vector<RowSummary>& rows,
                                      const std::string& dir) {
  const std::string stem = "seed" + r.exp.id;
  if (!write_file(dir + "/" + stem + ".dat", chart_data(rows)) || !write_file(dir + "/" + stem + ".gp", script(r, stem)))
    return blkmq::Status::error(EIO, "cannot write the chart files in " + dir);
  // The script names its files relative to the results folder.
  const std::string cmd = "cd '" + dir + "' && gnuplot " + stem + ".gp 2>&1";
  const int rc = std::system(cmd.c_str());
  if (rc != 0) {
    const bool missing = WIFEXITED(rc) && WEXITSTATUS(rc) == 127;
    return blkmq::Status::error(
        5, missing ? "gnuplot is not installed (apt-get install gnuplot-nox); the data and script are in " + dir
                   : "gnuplot failed on " + dir + "/" + stem + ".gp");
  }
  return stem + ".png";
}

}  // namespace repro

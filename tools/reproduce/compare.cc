#include "reproduce/compare.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "base/parse.h"
#include "bench/options.h"
#include "reproduce/interleave.h"
#include "reproduce/table.h"

namespace repro {
namespace {

// Takes `--NAME=V` or `--NAME V` out of args; returns false if absent.
bool take_option(std::vector<std::string>& args, const std::string& name, std::string* value) {
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i].rfind(name + "=", 0) == 0) {
      *value = args[i].substr(name.size() + 1);
      args.erase(args.begin() + static_cast<long>(i));
      return true;
    }
    if (args[i] == name && i + 1 < args.size()) {
      *value = args[i + 1];
      args.erase(args.begin() + static_cast<long>(i), args.begin() + static_cast<long>(i) + 2);
      return true;
    }
  }
  return false;
}

int fail(const std::string& msg) {
  std::fprintf(stderr, "blkmq bench: %s\n", msg.c_str());
  return 1;
}

// The job's first device made with `extra` added to its options; its
// status (a parse error of the job itself counts as ok: the runs report it).
blkmq::Status try_device(const std::vector<std::string>& common, const std::string& extra) {
  std::vector<std::string> args = {"bench"};
  args.insert(args.end(), common.begin(), common.end());
  if (!extra.empty()) args.push_back(extra);
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  const int argc = static_cast<int>(argv.size());
  bench::BenchConfig cfg;
  const std::string driver = bench::prescan_driver(argc, argv.data());
  const bench::ParseOutcome po =
      bench::parse_bench_args(argc, argv.data(), blkmq::device_params(driver), &cfg, blkmq::device_params);
  if (!po.proceed) return blkmq::Status::OK();
  auto dev = blkmq::create_device(cfg.driver, cfg.device_params);
  return dev ? blkmq::Status::OK() : dev.status();
}

// Both values are tried on a device made as the job's first one, before
// any run: a bad B used to show only after every round of A had run
// (issue 27). Only where the device can be made without them (a file the
// bench lays out first cannot yet). Empty when both are accepted.
std::string check_values(const std::vector<std::string>& common, const std::string& attr,
                         const std::vector<std::string>& values) {
  if (!try_device(common, "")) return "";
  for (const std::string& v : values)
    if (blkmq::Status st = try_device(common, "--attr=" + attr + "=" + v); !st)
      return attr + "=" + v + ": " + st.message();
  return "";
}

}  // namespace

bool wants_compare(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--compare") == 0 || std::strncmp(argv[i], "--compare=", 10) == 0) return true;
  return false;
}

int compare_main(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  std::string spec, repeat = "3";
  take_option(args, "--compare", &spec);
  take_option(args, "--repeat", &repeat);
  const size_t eq = spec.find('='), comma = spec.find(',', eq == std::string::npos ? 0 : eq);
  if (eq == std::string::npos || eq == 0 || comma == std::string::npos || comma == eq + 1 ||
      comma + 1 == spec.size() || spec.find(',', comma + 1) != std::string::npos)
    return fail(blkmq::base::invalid_value("--compare", spec, "is not two values of one attribute",
                                           "PATH=A,B, e.g. queue/rq_affinity=1,2")
                    .message());
  auto rounds_or = blkmq::base::parse_uint("--repeat", repeat, 1, 1000);
  if (!rounds_or) return fail(rounds_or.status().message());
  const uint64_t rounds = *rounds_or;
  Experiment e;
  e.id = "compare";
  e.title = "the same job, " + spec.substr(0, eq) + " at each value";
  e.attr = spec.substr(0, eq);
  e.before = spec.substr(eq + 1, comma - eq - 1);
  e.after = spec.substr(comma + 1);
  e.common.assign(args.begin() + 1, args.end());
  if (const std::string bad = check_values(e.common, e.attr, {e.before, e.after}); !bad.empty()) return fail(bad);
  std::string label = "blkmq bench";
  for (const std::string& a : e.common) label += " " + a;
  e.rows = {{label, {}, {key::kIops, key::kBwMib, key::kLatUs, key::kUsrPct, key::kSysPct}, {}, ""}};
  const unsigned ncpus = static_cast<unsigned>(sysconf(_SC_NPROCESSORS_ONLN));
  ExperimentResult r = run_experiment(e, static_cast<unsigned>(rounds), 0, bench_runner(ncpus),
                                      [](const std::string& l) { std::fprintf(stderr, "  %s\n", l.c_str()); });
  std::vector<RowSummary> rows = summarize(r);
  rows[0].note.clear();
  std::fputs(format_text(r, rows, static_cast<unsigned>(rounds)).c_str(), stdout);
  return rows[0].error.empty() ? 0 : 1;
}

}  // namespace repro

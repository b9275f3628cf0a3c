#include "reproduce/reproduce.h"


#include <sys/utsname.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "bench/suggest.h"
#include "reproduce/chart.h"
#include "reproduce/interleave.h"
#include "reproduce/kernel.h"
#include "reproduce/table.h"

namespace repro {
namespace {

namespace fs = std::filesystem;

struct Options {
  std::vector<std::string> seeds;
  bool quick = false;
  unsigned rounds = 0;     // 0: 3 with --quick, else 5
  double runtime_s = 0;    // 0: 1.5 with --quick, else 5
  std::string out;         // empty: results/reproduce-<time>
  std::string scratch;     // empty: the results folder
};

// The value of the first "KEY : value" line of a /proc file whose key starts
// with `prefix` ("" if none).
std::string proc_value(const std::string& path, const std::string& prefix) {
  std::ifstream f(path);
  for (std::string l; std::getline(f, l);) {
    const size_t colon = l.find(':');
    if (l.compare(0, prefix.size(), prefix) == 0 && colon != std::string::npos)
      return l.substr(std::min(l.size(), colon + 2));
  }
  return "";
}

std::string loadavg() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

Machine machine() {
  Machine m;
  m.cpus = static_cast<unsigned>(sysconf(_SC_NPROCESSORS_ONLN));
  m.model = proc_value("/proc/cpuinfo", "model name");
  if (m.model.empty()) m.model = "unknown CPU model";
  utsname u{};
  if (uname(&u) == 0) m.kernel = std::string(u.sysname) + " " + u.release;
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  char mem[32];
  std::snprintf(mem, sizeof mem, "%.1f GiB", static_cast<double>(pages) * static_cast<double>(page) / (1u << 30));
  m.memory = mem;
  m.load_before = loadavg();
  return m;
}

std::string default_out() {
  char b[64];
  std::time_t t = std::time(nullptr);
  std::strftime(b, sizeof b, "results/reproduce-%Y%m%d-%H%M%S", std::localtime(&t));
  return b;
}

int parse(int argc, char** argv, Options* o) {
  CLI::App app("The four seed experiments, each seed's before/after beside ours, interleaved runs.\n"
               "`blkmq reproduce kernel [--short] [--help]` compares blkmq's schedulers with the kernel's\n"
               "on a loop device instead (bench/kernel_fidelity.sh, docs/FIDELITY.md).",
               "blkmq reproduce");
  app.add_option("seeds", o->seeds, "seeds to run: 000 001 002 003 (default: all)")
      ->check(CLI::IsMember({"000", "001", "002", "003"}));
  app.add_flag("--quick", o->quick, "short runs: 3 rounds of 1.5 s (about 3 minutes in all; make run's job)");
  app.add_option("--rounds", o->rounds, "rounds per row; each round runs before, then after (default 5, 3 with --quick)")
      ->check(CLI::Range(1u, 1000u));
  app.add_option("--runtime", o->runtime_s, "seconds per run (default 5, 1.5 with --quick)")
      ->check(CLI::Range(0.1, 3600.0));
  app.add_option("--out", o->out, "results folder (default results/reproduce-<date>-<time>)");
  app.add_option("--scratch", o->scratch, "folder for seed 002's backing file (default: the results folder)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // Exit 1, as every other blkmq command (CLI11's own codes are 100+).
    std::fprintf(stderr, "blkmq reproduce: %s\nsee blkmq reproduce --help\n",
                 bench::parse_error_message(app, e).c_str());
    return 1;
  }
  if (o->seeds.empty()) o->seeds = {"000", "001", "002", "003"};
  if (!o->rounds) o->rounds = o->quick ? 3 : 5;
  if (!o->runtime_s) o->runtime_s = o->quick ? 1.5 : 5;
  if (o->out.empty()) o->out = default_out();
  if (o->scratch.empty()) o->scratch = o->out;
  return -1;
}

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::trunc);
  f << text;
  f.close();
  return static_cast<bool>(f);
}

struct Report {
  std::string markdown;
  nlohmann::ordered_json seeds = nlohmann::ordered_json::array();
  bool failed = false;
};

// Runs one experiment, prints its table and adds it to the report.
void run_one(const Experiment& e, const Options& o, const RunFn& run, Report* rep) {
  std::fprintf(stderr, "blkmq reproduce: seed %s (%zu rows x %u rounds x 2 runs of %.1f s)\n", e.id.c_str(),
               e.rows.size(), o.rounds, o.runtime_s);
  ExperimentResult r = run_experiment(e, o.rounds, o.runtime_s, run,
                                      [](const std::string& l) { std::fprintf(stderr, "  %s\n", l.c_str()); });
  std::vector<RowSummary> rows = summarize(r);
  std::fputs(format_text(r, rows, o.rounds).c_str(), stdout);
  std::fflush(stdout);
  blkmq::Result<std::string> png = draw_chart(r, rows, o.out);
  if (!png) std::fprintf(stderr, "blkmq reproduce: chart of seed %s: %s\n", e.id.c_str(), png.status().message().c_str());
  rep->markdown += format_markdown(r, rows, o.rounds, png ? *png : "");
  rep->seeds.push_back(to_json(r, rows));
  for (const RowSummary& s : rows) rep->failed |= !s.error.empty();
}

std::string command_line(int argc, char** argv) {
  std::string s = "blkmq";
  for (int i = 0; i < argc; ++i) s += std::string(" ") + argv[i];
  return s;
}

}  // namespace

int reproduce_main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "kernel") return kernel_main(argc - 1, argv + 1);
  Options o;
  if (int rc = parse(argc, argv, &o); rc >= 0) return rc;
  std::error_code ec;
  fs::create_directories(o.out, ec);
  fs::create_directories(o.scratch, ec);
  if (!fs::is_directory(o.out) || !fs::is_directory(o.scratch)) {
    std::fprintf(stderr, "blkmq reproduce: cannot create %s\n", o.out.c_str());
    return 1;
  }
  Scale scale;
  scale.runtime_s = o.runtime_s;
  scale.scratch_dir = o.scratch;
  scale.file_size = o.quick ? 256ull << 20 : 1ull << 30;
  Machine m = machine();
  std::fputs(format_machine(m).c_str(), stdout);
  const std::set<std::string> chosen(o.seeds.begin(), o.seeds.end());
  const RunFn run = bench_runner(m.cpus);
  Report rep;
  for (const Experiment& e : seed_experiments(scale))
    if (chosen.count(e.id)) run_one(e, o, run, &rep);
  fs::remove(o.scratch + "/" + kSeed002File, ec);
  m.load_after = loadavg();
  const std::string cmd = command_line(argc, argv);
  nlohmann::ordered_json j = {{"command", cmd}, {"machine", to_json(m)}, {"rounds", o.rounds},
                              {"runtime_s", o.runtime_s}, {"seeds", rep.seeds}};
  const std::string md = "# blkmq reproduce\n\n`" + cmd + "`\n\n" + format_machine(m) + "\n" + rep.markdown;
  if (!write_file(o.out + "/results.json", j.dump(2) + "\n") || !write_file(o.out + "/REPORT.md", md)) {
    std::fprintf(stderr, "blkmq reproduce: cannot write the report in %s\n", o.out.c_str());
    return 1;
  }
  std::printf("\n%sreport: %s/REPORT.md (results.json and charts beside it)\n", format_machine(m).c_str(),
              o.out.c_str());
  return rep.failed ? 1 : 0;
}

}  // namespace repro

#include "reproduce/interleave.h"

#include <cstdio>
#include <memory>
#include <set>

#include "bench/bench.h"
#include "bench/options.h"

namespace repro {

ExperimentResult run_experiment(const Experiment& e, unsigned rounds, double runtime_s, const RunFn& run,
                                const ProgressFn& progress) {
  ExperimentResult res{e, {}};
  for (size_t r = 0; r < e.rows.size(); ++r) {
    RowResult& row = res.rows.emplace_back();
    for (unsigned round = 0; round < rounds && row.error.empty(); ++round) {
      for (const std::string* value : {&e.before, &e.after}) {
        blkmq::Result<Sample> s = run(run_args(e, e.rows[r], *value, runtime_s));
        row.order.push_back(*value);
        if (!s) {
          row.error = e.attr + "=" + *value + ": " + s.status().message();
          break;
        }
        (value == &e.before ? row.before : row.after).push_back(*s);
        if (progress) {
          char line[256];
          std::snprintf(line, sizeof line, "seed %s row %zu/%zu round %u/%u %s=%s: %s IOPS", e.id.c_str(), r + 1,
                        e.rows.size(), round + 1, rounds, e.attr.c_str(), value->c_str(),
                        format_value(key::kIops, s->count(key::kIops) ? s->at(key::kIops) : 0).c_str());
          progress(line);
        }
      }
    }
  }
  return res;
}

RunFn bench_runner(unsigned ncpus) {
  // fio options ignored so far: each is reported once per runner, not per run.
  auto told = std::make_shared<std::set<std::string>>();
  return [ncpus, told](const std::vector<std::string>& args) -> blkmq::Result<Sample> {
    std::vector<const char*> argv;
    for (const std::string& a : args) argv.push_back(a.c_str());
    bench::BenchConfig cfg;
    const std::string driver = bench::prescan_driver(static_cast<int>(argv.size()), argv.data());
    bench::ParseOutcome po = bench::parse_bench_args(static_cast<int>(argv.size()), argv.data(),
                                                     blkmq::device_params(driver), &cfg, blkmq::device_params);
    if (!po.proceed) return blkmq::Status::invalid(po.message);
    for (const std::string& opt : cfg.ignored_options)
      if (told->insert(opt).second)
        std::fprintf(stderr, "blkmq reproduce: fio option --%s ignored (no meaning for driver %s)\n", opt.c_str(),
                     cfg.driver.c_str());
    cfg.sample_attrs.push_back(kLockStatAttr);
    blkmq::Result<bench::RunReport> rep = bench::run_bench(cfg);
    if (!rep) return rep.status();
    for (const bench::JobResult& j : rep->jobs)
      if (j.error != 0) return blkmq::Status::error(j.error, j.name + ": " + j.error_msg);
    return sample_from_report(*rep, ncpus);
  };
}

}  // namespace repro

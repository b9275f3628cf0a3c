// blkmq_micro's entry point: Google Benchmark's usual main, plus two
// things it lacks. The scheduler benchmarks are registered at run time, one
// pair per elevator the library has registered, so a new scheduler is
// measured without editing this directory. And the exit status is non-zero
// when a benchmark reported an error (SkipWithError) or nothing ran, which
// libbenchmark 1.7 does not do by itself, so the ctest smoke run catches a
// benchmark that failed as well as one that crashed.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <vector>

#include "micro_util.h"

namespace {

// Forwards everything to the reporter --benchmark_format chose and counts
// the runs that ended with an error. Called by libbenchmark on the main
// thread only.
class ErrorCountingReporter : public benchmark::BenchmarkReporter {
 public:
  explicit ErrorCountingReporter(benchmark::BenchmarkReporter* inner) : inner_(inner) {}
  bool ReportContext(const Context& context) override { return inner_->ReportContext(context); }
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.error_occurred) {
        errors_++;
        std::fprintf(stderr, "blkmq_micro: %s failed: %s\n", r.benchmark_name().c_str(),
                     r.error_message.c_str());
      }
    }
    inner_->ReportRuns(runs);
  }
  void Finalize() override { inner_->Finalize(); }
  unsigned errors() const { return errors_; }

 private:
  benchmark::BenchmarkReporter* inner_;  // owned by libbenchmark
  unsigned errors_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  blkmq::micro::register_sched_benchmarks();
  ErrorCountingReporter reporter(benchmark::CreateDefaultDisplayReporter());
  size_t ran = benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  if (ran == 0) std::fprintf(stderr, "blkmq_micro: no benchmark matched the filter\n");
  return ran == 0 || reporter.errors() ? 1 : 0;
}

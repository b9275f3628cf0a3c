#include "bench/bench.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "blkmq/device.h"
#include "blkmq/threads.h"
#include "bench/job.h"
#include "bench/options.h"
#include "bench/report.h"

namespace bench {
namespace {

using Clock = std::chrono::steady_clock;

int fail(const std::string& msg) {
  std::fprintf(stderr, "blkmq bench: %s\n", msg.c_str());
  return 1;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// Snapshots taken when measurement starts (after the ramp) and at the end.
struct Snapshot {
  ThreadUsageMap threads;
  blkmq::DiskStat disk{};
  Clock::time_point at;
  static Snapshot take(const blkmq::Queue& q) { return {blkmq::thread_usage(), q.disk_stat(), Clock::now()}; }
};

// Runs the job threads and drives their ramp and stop times. The
// controller sleeps on a condition variable, so it costs the jobs nothing.
class Runner {
 public:
  Runner(std::vector<std::unique_ptr<Job>>& jobs, const blkmq::Queue& q) : jobs_(jobs), q_(q) {}

  Snapshot run(Snapshot* before) {
    const JobSpec& spec = jobs_.front()->spec();
    Clock::time_point start = Clock::now();
    Clock::time_point ramp_end = start + std::chrono::nanoseconds(spec.ramp_ns);
    bool ramped = spec.ramp_ns == 0;
    if (ramped) *before = Snapshot::take(q_);
    running_ = static_cast<unsigned>(jobs_.size());
    std::vector<std::thread> threads;
    for (auto& j : jobs_) threads.emplace_back([this, job = j.get()] { thread_body(job); });
    bool stop_pending = spec.runtime_ns != 0;
    Clock::time_point stop_at = ramp_end + std::chrono::nanoseconds(spec.runtime_ns);
    auto all_done = [this] { return running_ == 0; };
    std::unique_lock lock(mu_);
    while (running_ > 0) {
      if (!ramped || stop_pending) {
        cv_.wait_until(lock, ramped ? stop_at : ramp_end, all_done);
      } else {
        cv_.wait(lock, all_done);
      }
      Clock::time_point now = Clock::now();
      if (!ramped && now >= ramp_end) {
        ramped = true;
        *before = Snapshot::take(q_);
        for (auto& j : jobs_) j->end_ramp();
      }
      if (ramped && stop_pending && now >= stop_at) {
        for (auto& j : jobs_) j->stop();
        stop_pending = false;
      }
    }
    lock.unlock();
    for (std::thread& t : threads) t.join();
    if (!ramped) *before = Snapshot::take(q_);
    return Snapshot::take(q_);
  }

 private:
  void thread_body(Job* job) {
    job->run();
    std::lock_guard g(mu_);
    running_--;
    cv_.notify_all();
  }

  std::vector<std::unique_ptr<Job>>& jobs_;
  const blkmq::Queue& q_;
  std::mutex mu_;
  std::condition_variable cv_;
  unsigned running_ = 0;
};

Status write_report(const BenchConfig& cfg, const RunReport& rep) {
  std::string text = cfg.output_format == OutputFormat::json ? format_json(rep) : format_normal(rep);
  if (cfg.output_file.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return Status::ok();
  }
  std::ofstream f(cfg.output_file, std::ios::trunc);
  f << text;
  f.close();
  if (!f) return Status::error(5, "cannot write --output=" + cfg.output_file);
  return Status::ok();
}

RunReport make_report(const BenchConfig& cfg, const blkmq::Device& dev, blkmq::Queue& q,
                      const std::vector<std::unique_ptr<Job>>& jobs, const Snapshot& before,
                      const Snapshot& after) {
  RunReport rep;
  for (const auto& j : jobs) rep.jobs.push_back(j->result());
  rep.group_reporting = cfg.group_reporting;
  rep.run_ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(after.at - before.at).count());
  rep.timestamp_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch()).count();
  rep.pid = static_cast<int>(getpid());
  rep.driver = dev.driver_name();
  rep.device_name = q.name();
  rep.have_disk = true;
  rep.disk = disk_stat_delta(before.disk, after.disk);
  rep.threads = thread_usage_delta(before.threads, after.threads);
  return rep;
}

}  // namespace

int bench_main(int argc, char** argv) {
  std::string driver = prescan_driver(argc, argv);
  std::vector<std::string> drivers = blkmq::device_drivers();
  if (std::find(drivers.begin(), drivers.end(), driver) == drivers.end())
    return fail("unknown driver '" + driver + "' (available: " + join(drivers) + ")");
  BenchConfig cfg;
  ParseOutcome po = parse_bench_args(argc, argv, blkmq::device_params(driver), &cfg);
  if (!po.proceed) {
    std::fputs(po.message.c_str(), po.exit_code == 0 ? stdout : stderr);
    if (!po.message.empty() && po.message.back() != '\n') std::fputc('\n', po.exit_code == 0 ? stdout : stderr);
    return po.exit_code;
  }
  auto dev = blkmq::create_device(cfg.driver, cfg.device_params);
  if (!dev) return fail(dev.status().message());
  blkmq::Queue& q = (*dev)->queue();

  std::vector<std::unique_ptr<Job>> jobs;
  for (const JobSpec& spec : cfg.jobs) {
    for (unsigned i = 0; i < spec.numjobs; ++i) {
      jobs.push_back(std::make_unique<Job>(spec, i, q, (*dev)->size_bytes()));
      Status st = jobs.back()->prepare();
      if (!st) return fail(st.message());
    }
  }
  Snapshot before, after;
  after = Runner(jobs, q).run(&before);
  RunReport rep = make_report(cfg, **dev, q, jobs, before, after);
  // Completion threads may still be returning from end_io: stop them (by
  // destroying the device) before the jobs' units go away.
  dev->reset();
  jobs.clear();
  Status st = write_report(cfg, rep);
  if (!st) return fail(st.message());
  for (const JobResult& r : rep.jobs)
    if (r.error != 0) return 1;
  return 0;
}

}  // namespace bench

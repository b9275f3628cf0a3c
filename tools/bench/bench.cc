#include "bench/bench.h"

#include <cerrno>
#include <unistd.h>

#include <cinttypes>

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
#include "blkmq/sysfs_tree.h"
#include "base/thread.h"
#include "bench/cycle.h"
#include "bench/job.h"
#include "bench/layout.h"
#include "bench/options.h"
#include "bench/report.h"
#include "bench/status_line.h"
#include "control/control.h"
#include "reproduce/compare.h"

namespace bench {
namespace {

using Clock = std::chrono::steady_clock;

int fail(const std::string& msg) {
  std::fprintf(stderr, "blkmq bench: %s\n", msg.c_str());
  return 1;
}

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

// Snapshots taken when measurement starts (after the ramp) and at the end.
using Queues = std::vector<blkmq::Queue*>;

struct Snapshot {
  ThreadUsageMap threads;
  CpuUsage process;
  std::vector<blkmq::DiskStat> disks;  // one per device
  Clock::time_point at;
  static Snapshot take(const Queues& qs) {
    Snapshot s{blkmq::base::thread_usage(), CpuUsage::process_now(), {}, {}};
    for (const blkmq::Queue* q : qs) s.disks.push_back(q->disk_stat());
    s.at = Clock::now();
    return s;
  }
};

// Runs the job threads of one group and drives each job's ramp and stop
// times. The controller sleeps on a condition variable until the next
// deadline, so it costs the jobs nothing.
class Runner {
 public:
  // status: where the live status line goes once a second; nullptr: none.
  Runner(const std::vector<Job*>& jobs, const Queues& qs, StatusLine* status = nullptr)
      : jobs_(jobs), q_(qs), status_(status) {}

  // Returns the snapshot at the end; *before is taken when the last ramp
  // of the group ended (or at the end, if the jobs finished inside it).
  Snapshot run(Snapshot* before) {
    init_deadlines(Clock::now());
    // Without a ramp, measurement starts before the first I/O.
    bool snapped = ramps_pending_ == 0;
    if (snapped) *before = Snapshot::take(q_);
    running_ = static_cast<unsigned>(jobs_.size());
    std::vector<std::thread> threads;
    for (Job* j : jobs_) threads.emplace_back([this, j] { thread_body(j); });
    auto all_done = [this] { return running_ == 0; };
    const Clock::time_point start = Clock::now();
    ProgressSampler sampler(jobs_, start);
    Clock::time_point next_status = status_ ? start + kStatusPeriod : Clock::time_point::max();
    std::unique_lock lock(mu_);
    while (running_ > 0) {
      if (!snapped && ramps_pending_ == 0) {
        *before = Snapshot::take(q_);
        snapped = true;
      }
      Clock::time_point next = std::min(next_deadline(), next_status);
      if (next == Clock::time_point::max()) {
        cv_.wait(lock, all_done);
      } else {
        cv_.wait_until(lock, next, all_done);
      }
      const Clock::time_point now = Clock::now();
      fire_deadlines(now);
      if (now >= next_status && running_ > 0) {
        status_->show(sampler.sample(now));
        next_status += kStatusPeriod;
      }
    }
    lock.unlock();
    for (std::thread& t : threads) t.join();
    if (!snapped) *before = Snapshot::take(q_);
    return Snapshot::take(q_);
  }

 private:
  struct Deadline {
    Clock::time_point ramp_end, stop_at;
    bool ramp_pending, stop_pending;
  };

  void init_deadlines(Clock::time_point start) {
    ramps_pending_ = 0;
    for (Job* j : jobs_) {
      const JobSpec& spec = j->spec();
      Deadline d;
      d.ramp_end = start + std::chrono::nanoseconds(spec.ramp_ns);
      d.stop_at = d.ramp_end + std::chrono::nanoseconds(spec.runtime_ns);
      d.ramp_pending = spec.ramp_ns != 0;
      d.stop_pending = spec.runtime_ns != 0;
      ramps_pending_ += d.ramp_pending;
      deadlines_.push_back(d);
    }
  }

  Clock::time_point next_deadline() const {
    Clock::time_point next = Clock::time_point::max();
    for (const Deadline& d : deadlines_) {
      if (d.ramp_pending) next = std::min(next, d.ramp_end);
      else if (d.stop_pending) next = std::min(next, d.stop_at);
    }
    return next;
  }

  void fire_deadlines(Clock::time_point now) {
    for (size_t i = 0; i < jobs_.size(); ++i) {
      Deadline& d = deadlines_[i];
      if (d.ramp_pending && now >= d.ramp_end) {
        d.ramp_pending = false;
        ramps_pending_--;
        jobs_[i]->end_ramp();
      }
      if (!d.ramp_pending && d.stop_pending && now >= d.stop_at) {
        d.stop_pending = false;
        jobs_[i]->stop();
      }
    }
  }

  void thread_body(Job* job) {
    job->run();
    std::lock_guard g(mu_);
    running_--;
    cv_.notify_all();
  }

  static constexpr std::chrono::seconds kStatusPeriod{1};  // fio refreshes its line once a second

  const std::vector<Job*>& jobs_;
  const Queues& q_;
  StatusLine* const status_;
  std::vector<Deadline> deadlines_;
  unsigned ramps_pending_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  unsigned running_ = 0;
};

Status write_report(const BenchConfig& cfg, const RunReport& rep) {
  // fio's order for a list of formats: JSON first, then the normal text.
  const OutputFormat fmt = cfg.output_format;
  std::string text;
  if (has_format(fmt, OutputFormat::json) || has_format(fmt, OutputFormat::json_plus))
    text = format_json(rep, has_format(fmt, OutputFormat::json_plus));
  if (has_format(fmt, OutputFormat::normal)) text += format_normal(rep);
  if (cfg.output_file.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return Status::OK();
  }
  std::ofstream f(cfg.output_file, std::ios::trunc);
  f << text;
  f.close();
  if (!f) return Status::error(EIO, "cannot write --output=" + cfg.output_file);
  return Status::OK();
}

RunReport make_report(const BenchConfig& cfg, const blkmq::Device& dev, const Queues& qs,
                      const std::vector<std::unique_ptr<Job>>& jobs, const Snapshot& before,
                      const Snapshot& after) {
  RunReport rep;
  for (const auto& j : jobs) {
    rep.jobs.push_back(j->result());
    rep.jobs.back().groupid = j->spec().groupid;
  }
  rep.group_reporting = cfg.group_reporting;
  rep.run_ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(after.at - before.at).count());
  rep.timestamp_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch()).count();
  rep.pid = static_cast<int>(getpid());
  rep.driver = dev.driver_name();
  for (size_t i = 0; i < qs.size(); ++i)
    rep.disks.push_back({qs[i]->name(), disk_stat_delta(before.disks[i], after.disks[i])});
  rep.threads = thread_usage_delta(before.threads, after.threads);
  rep.process = after.process - before.process;
  return rep;
}

// The --write_*_log files of a finished group, numbered from 1 across the
// run as fio numbers its jobs; `first` is the group's first job index. A
// file that cannot be written is reported and the run goes on, as in fio.
void write_logs(const std::vector<Job*>& group, size_t first) {
  for (size_t k = 0; k < group.size(); ++k) {
    Status st = group[k]->io_log().write(static_cast<unsigned>(first + k + 1));
    if (!st) std::fprintf(stderr, "blkmq bench: %s\n", st.message().c_str());
  }
}

// Runs the groups one after the other; *before is the first group's start
// of measurement, the result the end of the last group.
Snapshot run_groups(const BenchConfig& cfg, const std::vector<std::unique_ptr<Job>>& jobs, const Queues& qs,
                    Snapshot* before, std::vector<GroupSpan>* spans) {
  const OutputFormat fmt = cfg.output_format;
  const bool json_to_stdout = cfg.output_file.empty() &&
                              (has_format(fmt, OutputFormat::json) || has_format(fmt, OutputFormat::json_plus));
  StatusLine status(stdout);
  StatusLine* shown = status_line_wanted(cfg.eta, isatty(STDOUT_FILENO) == 1, json_to_stdout) ? &status : nullptr;
  Snapshot after;
  const Clock::time_point t0 = Clock::now();
  auto since = [t0](Clock::time_point t) {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(t - t0).count());
  };
  for (size_t i = 0; i < jobs.size();) {
    std::vector<Job*> group;
    const unsigned gid = jobs[i]->spec().groupid;
    for (; i < jobs.size() && jobs[i]->spec().groupid == gid; ++i) group.push_back(jobs[i].get());
    Snapshot group_before;
    const Clock::time_point start = Clock::now();
    after = Runner(group, qs, shown).run(&group_before);
    spans->push_back({gid, since(start), since(after.at)});
    write_logs(group, i - group.size());
    if (gid == jobs.front()->spec().groupid) *before = group_before;
  }
  status.clear();
  return after;
}

int report_cycle_errors(const std::vector<CycleResult>& cycles) {
  int rc = 0;
  for (const CycleResult& c : cycles) {
    if (c.refused == 0) continue;
    std::fprintf(stderr, "blkmq bench: --cycle %s: %" PRIu64 " value(s) refused, first: %s\n", c.path.c_str(),
                 c.refused, c.first_error.c_str());
    rc = 1;
  }
  return rc;
}

// Ends each device's trace; what a full buffer lost goes to stderr with
// the options that trace less, as blktrace warns of its drops.
void stop_traces(const Queues& qs) {
  for (blkmq::Queue* q : qs) {
    const std::string w = blkmq::blktrace_drop_warning(
        q->stop_blktrace(),
        "record fewer events with --blktrace_act_mask=issue,complete (only D and C), --blktrace_start_lba= "
        "and --blktrace_end_lba= (a sector range) or --blktrace_pid= (one thread), or give each CPU a larger "
        "--blktrace_buffer_size= (for bursts)");
    if (!w.empty()) std::fprintf(stderr, "blkmq bench: warning: %s\n", w.c_str());
  }
}

// --fixedbufs: each device gets the buffers of the jobs that run on it and
// asked for it. A driver with no registered buffers ignores it (said once
// per process: reproduce runs many benches); a registration the kernel
// refuses fails the run, as fio's io_uring engine fails the job.
Status register_job_buffers(const std::vector<std::unique_ptr<Job>>& jobs,
                            const std::vector<std::unique_ptr<blkmq::Device>>& devs, const Queues& qs) {
  for (size_t d = 0; d < devs.size(); ++d) {
    std::vector<iovec> regions;
    for (const auto& j : jobs)
      if (j->spec().fixedbufs && &j->queue() == qs[d]) regions.push_back(j->buffer_region());
    if (regions.empty()) continue;
    Status st = devs[d]->register_buffers(regions.data(), regions.size());
    if (st.code() == EOPNOTSUPP) {
      static std::once_flag said;
      std::call_once(said, [&] {
        std::fprintf(stderr, "blkmq bench: --fixedbufs ignored: %s\n", st.message().c_str());
      });
    } else if (!st) {
      return Status::error(st.code(), "--fixedbufs: " + st.message());
    }
  }
  return Status::OK();
}

}  // namespace

blkmq::Result<RunReport> run_bench(const BenchConfig& cfg) {
  if (Status st = lay_out_missing_file(cfg); !st) return st;
  std::vector<std::unique_ptr<blkmq::Device>> devs;
  Queues qs;
  for (unsigned i = 0; i < cfg.ndevices; ++i) {
    auto dev = blkmq::create_device(cfg.driver, cfg.device_params);
    if (!dev) return dev.status();
    devs.push_back(std::move(dev.value()));
    qs.push_back(&devs.back()->queue());
  }

  // Every job of every group is prepared up front, so a bad job fails the
  // run before any I/O. Clone N of a job runs on device N % ndevices.
  std::vector<std::unique_ptr<Job>> jobs;
  for (const JobSpec& spec : cfg.jobs) {
    for (unsigned i = 0; i < spec.numjobs; ++i) {
      const unsigned d = i % cfg.ndevices;
      jobs.push_back(std::make_unique<Job>(spec, i, *qs[d], devs[d]->size_bytes()));
      Status st = jobs.back()->prepare();
      if (!st) return st;
    }
  }
  if (Status st = register_job_buffers(jobs, devs, qs); !st) return st;
  std::unique_ptr<blkmq::SysfsTree> tree;  // goes before the devices (declared after them)
  if (!cfg.sysfs_dir.empty()) {
    auto t = blkmq::SysfsTree::open(cfg.sysfs_dir);
    if (!t) return t.status();
    tree = std::move(*t);
    for (blkmq::Queue* q : qs)
      if (Status st = tree->add(*q); !st) return st;
  }
  std::unique_ptr<control::Server> ctl;
  if (!cfg.control_path.empty()) {
    auto c = control::Server::start(cfg.control_path, qs);
    if (!c) return c.status();
    ctl = std::move(*c);
  }
  if (!cfg.blktrace_dir.empty())
    for (blkmq::Queue* q : qs)
      if (Status st = q->start_blktrace(cfg.blktrace_dir, cfg.blktrace_buffer); !st) return st;
  AttrCycler cycler(qs, cfg.cycles);
  cycler.start();
  Snapshot before;
  std::vector<GroupSpan> spans;
  Snapshot after = run_groups(cfg, jobs, qs, &before, &spans);
  if (!cfg.blktrace_dir.empty()) stop_traces(qs);
  RunReport rep = make_report(cfg, *devs.front(), qs, jobs, before, after);
  rep.groups = std::move(spans);
  rep.cycles = cycler.stop();
  for (size_t i = 0; i < qs.size(); i++) {
    std::map<std::string, std::string>& m = rep.attrs.emplace_back();
    for (const std::string& path : cfg.sample_attrs) {
      if (blkmq::Result<std::string> v = qs[i]->attr(path)) {
        m[path] = std::move(*v);
      } else {
        const std::string dev = i < rep.disks.size() ? rep.disks[i].name : "device " + std::to_string(i);
        rep.attr_errors.push_back(dev + ": " + path + ": " + v.status().message());
      }
    }
  }
  // Completion threads may still be returning from end_io: stop them (by
  // destroying the devices) before the jobs' units go away.
  ctl.reset();
  tree.reset();
  devs.clear();
  jobs.clear();
  return rep;
}

int bench_exit_code(const RunReport& rep) {
  int rc = report_cycle_errors(rep.cycles);
  for (const JobResult& r : rep.jobs)
    if (r.error != 0) rc = 1;
  return rc;
}

int bench_main(int argc, char** argv) {
  if (repro::wants_compare(argc, argv)) return repro::compare_main(argc, argv);
  std::string driver = prescan_driver(argc, argv);
  std::vector<std::string> drivers = blkmq::device_drivers();
  if (std::find(drivers.begin(), drivers.end(), driver) == drivers.end())
    return fail("unknown driver '" + driver + "' (available: " + join(drivers) + ")");
  BenchConfig cfg;
  ParseOutcome po = parse_bench_args(argc, argv, blkmq::device_params(driver), &cfg, blkmq::device_params);
  if (!po.proceed) {
    std::fputs(po.message.c_str(), po.exit_code == 0 ? stdout : stderr);
    if (!po.message.empty() && po.message.back() != '\n') std::fputc('\n', po.exit_code == 0 ? stdout : stderr);
    return po.exit_code;
  }
  if (!cfg.ignored_options.empty())
    std::fprintf(stderr, "blkmq bench: ignored fio options (no meaning for driver %s): --%s\n", cfg.driver.c_str(),
                 join(cfg.ignored_options, ", --").c_str());
  blkmq::Result<RunReport> rep = run_bench(cfg);
  if (!rep) return fail(rep.status().message());
  Status st = write_report(cfg, *rep);
  if (!st) return fail(st.message());
  int rc = bench_exit_code(*rep);
  // After the report, as --attr's refusals come before the run: the path
  // may exist only under some scheduler, so it is read when the run ends.
  for (const std::string& e : rep->attr_errors) {
    std::fprintf(stderr, "blkmq bench: --show_attr %s\n", e.c_str());
    rc = 1;
  }
  return rc;
}

}  // namespace bench

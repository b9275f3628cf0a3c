#include "bench/cycle.h"

#include <algorithm>

#include "base/parse.h"

namespace bench {

using blkmq::Status;

namespace {

// `problem` as base/parse.h words it: "has no attribute path".
Status bad_cycle(std::string_view arg, std::string_view problem) {
  return blkmq::base::invalid_value("--cycle", arg, problem,
                                    "PATH=V1,V2,...@MS, e.g. queue/scheduler=none,mq-deadline@100");
}

}  // namespace

blkmq::Result<CycleSpec> parse_cycle(std::string_view arg) {
  size_t eq = arg.find('=');
  size_t at = arg.rfind('@');
  if (eq == 0 || eq == std::string_view::npos) return bad_cycle(arg, "has no attribute path");
  if (at == std::string_view::npos || at < eq) return bad_cycle(arg, "has no @MS period");
  CycleSpec c;
  c.path = std::string(arg.substr(0, eq));
  // Milliseconds when bare; kept in whole ms, at most a day.
  constexpr blkmq::base::TimeRule kPeriod{.bare_unit_ns = blkmq::base::kNsPerMs,
                                          .lo_ns = blkmq::base::kNsPerMs,
                                          .hi_ns = 86400 * blkmq::base::kNsPerSec,
                                          .resolution_ns = blkmq::base::kNsPerMs};
  auto period = blkmq::base::parse_time_ns("--cycle period", arg.substr(at + 1), kPeriod);
  if (!period) return period.status();
  c.period_ms = *period / blkmq::base::kNsPerMs;
  std::string_view vals = arg.substr(eq + 1, at - eq - 1);
  for (size_t pos = 0;;) {
    size_t comma = vals.find(',', pos);
    std::string_view v = vals.substr(pos, comma == std::string_view::npos ? vals.npos : comma - pos);
    if (v.empty()) return bad_cycle(arg, "has an empty value");
    c.values.emplace_back(v);
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return c;
}

AttrCycler::AttrCycler(std::vector<blkmq::Queue*> qs, std::vector<CycleSpec> specs)
    : qs_(std::move(qs)), specs_(std::move(specs)), results_(specs_.size()), next_value_(specs_.size(), 0),
      due_(specs_.size()) {
  for (size_t i = 0; i < specs_.size(); ++i) results_[i].path = specs_[i].path;
}

AttrCycler::~AttrCycler() { stop(); }

void AttrCycler::start() {
  if (specs_.empty() || thread_.joinable()) return;
  Clock::time_point now = Clock::now();
  for (size_t i = 0; i < specs_.size(); ++i) due_[i] = now + std::chrono::milliseconds(specs_[i].period_ms);
  thread_ = std::thread([this] { loop(); });
}

std::vector<CycleResult> AttrCycler::stop() {
  {
    std::lock_guard g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  return results_;
}

void AttrCycler::loop() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    Clock::time_point next = *std::min_element(due_.begin(), due_.end());
    if (cv_.wait_until(lock, next, [this] { return stop_; })) break;
    // set_attr may freeze the queue and wait for in-flight I/O: never hold
    // the lock across it, so stop() is not delayed by more than one switch.
    lock.unlock();
    Clock::time_point now = Clock::now();
    for (size_t i = 0; i < specs_.size(); ++i) {
      if (due_[i] > now) continue;
      switch_one(i);
      // A switch slower than the period must not cause catch-up bursts.
      const auto period = std::chrono::milliseconds(specs_[i].period_ms);
      due_[i] += period;
      if (Clock::time_point t = Clock::now(); due_[i] < t) due_[i] = t + period;
    }
    lock.lock();
  }
}

void AttrCycler::switch_one(size_t i) {
  const CycleSpec& c = specs_[i];
  const std::string& v = c.values[next_value_[i]];
  next_value_[i] = (next_value_[i] + 1) % c.values.size();
  CycleResult& r = results_[i];
  for (blkmq::Queue* q : qs_) {
    Status st = q->set_attr(c.path, v);
    if (st) {
      r.switches++;
    } else if (r.refused++ == 0) {
      r.first_error = c.path + "=" + v + ": " + st.message();
    }
  }
}

}  // namespace bench

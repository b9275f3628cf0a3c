// `--cycle PATH=V1,V2,...@MS`: a control thread that sets a queue attribute
// to the next of its values every MS milliseconds while the jobs run, so a
// scheduler switch or an nr_requests change can be measured (and stressed)
// under load.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "blkmq/queue.h"
#include "blkmq/status.h"

namespace bench {

struct CycleSpec {
  std::string path;                 // queue attribute, e.g. queue/scheduler
  std::vector<std::string> values;  // set round robin, first one after one period
  uint64_t period_ms = 0;
};

// Parses PATH=V1,V2,...@MS. Values cannot contain ','; MS is a time of
// 1 ms to 1 day in whole milliseconds, ms when bare (base::parse_time_ns:
// 100, 100ms, 2s).
blkmq::Result<CycleSpec> parse_cycle(std::string_view arg);

struct CycleResult {
  std::string path;
  uint64_t switches = 0;   // values a queue accepted (counted per device)
  uint64_t refused = 0;    // values set_attr refused
  std::string first_error; // the first refusal, for the report
};

// Runs the cycles of one device on one thread. The thread sleeps between
// switches, so it costs the jobs nothing but the switches themselves.
class AttrCycler {
 public:
  // Every switch is applied to each queue in turn.
  AttrCycler(std::vector<blkmq::Queue*> qs, std::vector<CycleSpec> specs);
  ~AttrCycler();
  AttrCycler(const AttrCycler&) = delete;
  AttrCycler& operator=(const AttrCycler&) = delete;

  void start();
  // Stops the thread (waits for a switch in progress) and returns the counts,
  // one per spec in the order given.
  std::vector<CycleResult> stop();

 private:
  using Clock = std::chrono::steady_clock;
  void loop();
  void switch_one(size_t i);

  const std::vector<blkmq::Queue*> qs_;
  const std::vector<CycleSpec> specs_;
  std::vector<CycleResult> results_;   // cycler thread until stop() joins it
  std::vector<size_t> next_value_;
  std::vector<Clock::time_point> due_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace bench

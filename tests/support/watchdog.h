// Stress tests are bounded in time: a watchdog aborts the process (with a
// message) if a scenario hangs, so CI fails instead of stalling.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include "support/stress.h"

namespace blkmq::test {

class Watchdog {
 public:
  Watchdog(std::string what, std::chrono::seconds limit) : what_(std::move(what)) {
    t_ = std::thread([this, limit] {
      std::unique_lock<std::mutex> l(mu_);
      if (!cv_.wait_for(l, limit, [this] { return done_; })) {
        std::fprintf(stderr, "watchdog: %s did not finish within %llds\n", what_.c_str(),
                     static_cast<long long>(limit.count()));
        std::abort();
      }
    });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> g(mu_);
      done_ = true;
    }
    cv_.notify_all();
    t_.join();
  }

 private:
  std::string what_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread t_;
};

}  // namespace blkmq::test

// The null device's bandwidth cap (mbps): a byte budget refilled by a 20 ms
// tick, as null_blk's bw_timer.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>

namespace blkmq::nullb {

// Thread-safe, lock-free. queue_rq consumes; the tick refills.
//
// Unlike null_blk, which resets the budget to one tick's worth on every
// tick, a request may overdraw a positive budget and the debt is carried
// into later ticks. That keeps the long-run rate exact and lets a request
// larger than one tick's budget through (null_blk would refuse it forever
// when mbps is small).
class BwBudget {
 public:
  static constexpr uint64_t kTickNs = 20ull * 1000 * 1000;  // 20 ms
  static constexpr uint64_t kTicksPerSec = 50;

  explicit BwBudget(unsigned mbps)
      : per_tick_(static_cast<int64_t>((uint64_t{1} << 20) * mbps / kTicksPerSec)),
        bytes_(per_tick_) {}

  // Takes `bytes` if any budget is left; false (nothing taken) when the
  // budget is exhausted.
  bool try_consume(uint64_t bytes) {
    const auto b = static_cast<int64_t>(bytes);
    // seq_cst pairs with nothing that needs it: the RMW's atomicity
    // shares the budget out; the lost-wakeup pairing is mark_throttled and
    // available() against refill and take_throttled.
    if (bytes_.fetch_sub(b, std::memory_order_seq_cst) > 0) return true;
    bytes_.fetch_add(b, std::memory_order_relaxed);
    return false;
  }

  // One tick: adds a tick's budget, capped at one tick's worth so that idle
  // time does not bank a burst. Returns true if budget is available now.
  bool refill() {
    int64_t cur = bytes_.load(std::memory_order_relaxed);
    int64_t next;
    // The budget refilled (seq_cst), then the caller's take_throttled:
    // pairs with null_ops.cc:throttle (mark_throttled, then available()):
    // either the tick sees the mark and restarts the queues, or the
    // consumer sees the new budget and restarts them itself.
    do {
      if (cur >= per_tick_) return true;  // full, or disabled
      next = std::min(cur + per_tick_, per_tick_);
    } while (!bytes_.compare_exchange_weak(cur, next, std::memory_order_seq_cst));
    return next > 0;
  }

  // Lifts the cap for good (teardown: queued I/O must drain unthrottled).
  // seq_cst: pairs with null_ops.cc:throttle's available() read after its
  // mark, as refill does.
  void disable() { bytes_.store(kUnlimited, std::memory_order_seq_cst); }

  // The consumer that failed marks itself, so the tick knows a restart of
  // the stopped queues is owed. take_throttled() clears and returns it.
  // The two halves of the pairing described at refill(): the consumer's
  // mark (null_ops.cc:throttle) and the tick's take (null_device.cc:
  // NullDevice::bw_tick), each against the other side's budget access.
  void mark_throttled() { throttled_.store(true, std::memory_order_seq_cst); }
  bool take_throttled() { return throttled_.exchange(false, std::memory_order_seq_cst); }

  // Read by null_ops.cc:throttle after its mark: see refill().
  int64_t available() const { return bytes_.load(std::memory_order_seq_cst); }
  int64_t per_tick() const { return per_tick_; }

 private:
  // Far above any debt a request could create, far below overflow.
  static constexpr int64_t kUnlimited = std::numeric_limits<int64_t>::max() / 2;
  const int64_t per_tick_;
  std::atomic<int64_t> bytes_;
  std::atomic<bool> throttled_{false};
};

}  // namespace blkmq::nullb

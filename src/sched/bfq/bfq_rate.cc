// bfq's estimate of the device's peak rate (bfq_update_peak_rate,
// bfq_update_rate_reset in the kernel): dispatches are sampled over an
// interval of at least 300 ms and 32 requests, the rate of each interval is
// low-pass filtered into the peak rate (only upwards for a mostly seeky
// workload), and the peak rate gives the automatic max_budget (what the
// device moves in one budget timeout) and the weight-raising duration
// (shorter on a faster device). A fast device gets long budgets: a
// sequential reader's slot then lasts until its timeout, not 8 MiB.
#include "sched/bfq/bfq_queue.h"

#include <algorithm>

namespace blkmq::bfq {
namespace {

unsigned rot_index(const BfqData* bfqd) { return bfqd->rotational ? 0 : 1; }

// bfq_reset_rate_computation: a new interval, starting with `rq` if any.
void reset_rate(BfqData* bfqd, const Request* rq, uint64_t now) {
  PeakRate& pr = bfqd->pr;
  if (!rq) {
    pr.samples = 0;  // the next dispatch starts the interval
    return;
  }
  pr.last_dispatch = pr.first_dispatch = now;
  pr.samples = 1;
  pr.sequential = 0;
  pr.tot_sectors = pr.last_rq_max_size = rq->data_len >> kSectorShift;
}

// bfq_update_rate_reset: folds the interval into the peak rate when it is
// long enough and says something (mostly sequential, or faster than the
// estimate), then starts a new one.
void update_rate_reset(BfqData* bfqd, const Request* rq, uint64_t now) {
  PeakRate& pr = bfqd->pr;
  if (pr.samples >= kRateMinSamples && pr.delta_from_first >= kRateMinIntervalNs) {
    // Up to the last completion, if later than the last dispatch.
    if (pr.last_completion > pr.first_dispatch)
      pr.delta_from_first = std::max(pr.delta_from_first, pr.last_completion - pr.first_dispatch);
    const uint64_t us = std::max<uint64_t>(1, pr.delta_from_first / 1000);
    const uint64_t rate = (pr.tot_sectors << kRateShift) / us;
    const bool mostly_seeky = pr.sequential < (3 * pr.samples) / 4;
    if (!((mostly_seeky && rate <= pr.rate) || rate > (uint64_t{20} << kRateShift))) {
      // The more sequential and the longer the interval, the more it weighs.
      uint64_t weight = 9ull * pr.sequential / pr.samples;
      weight = std::min<uint64_t>(8, weight * pr.delta_from_first / kRateRefIntervalNs);
      const uint64_t divisor = 10 - weight;
      pr.rate = pr.rate * (divisor - 1) / divisor + rate / divisor;
      pr.rate = std::max<uint64_t>(1, pr.rate);
      update_max_budget(bfqd);
    }
  }
  reset_rate(bfqd, rq, now);
}

}  // namespace

// bfq_calc_max_budget: what the device moves in one budget timeout at the
// estimated rate.
void update_max_budget(BfqData* bfqd) {
  const uint64_t timeout_ms = bfqd->tun.timeout_ns / kMs;
  bfqd->pr.max_budget = std::max<uint64_t>(1, (bfqd->pr.rate * 1000 * timeout_ms) >> kRateShift);
}

void init_peak_rate(BfqData* bfqd) {
  bfqd->pr = PeakRate{};
  bfqd->pr.rate = kRefRate[rot_index(bfqd)] * 2 / 3;
  update_max_budget(bfqd);
}

// Before the request counts as in the driver and before last_position
// moves past it (bfq_dispatch_remove's call).
void peak_rate_on_dispatch(BfqData* bfqd, const Request* rq, uint64_t now) {
  PeakRate& pr = bfqd->pr;
  const uint64_t sectors = rq->data_len >> kSectorShift;
  if (pr.samples == 0) {
    reset_rate(bfqd, rq, now);
    return;
  }
  // A long pause with nothing in the driver ends the interval.
  if (now - pr.last_dispatch > 100 * kMs && bfqd->rq_in_driver == 0) {
    update_rate_reset(bfqd, rq, now);
    return;
  }
  pr.samples++;
  const uint64_t last = bfqd->last_position;
  const uint64_t dist = last ? (rq->sector > last ? rq->sector - last : last - rq->sector) : 0;
  const bool seeky = dist > kSeekThr && (bfqd->rotational || sectors < kSectThrNonrot);
  if ((bfqd->rq_in_driver > 0 || now - pr.last_completion < kMinTtNs) && !seeky) pr.sequential++;
  pr.tot_sectors += sectors;
  // The largest request of each 32: a completion gap is judged against it.
  pr.last_rq_max_size = pr.samples % 32 ? std::max(sectors, pr.last_rq_max_size) : sectors;
  pr.delta_from_first = now - pr.first_dispatch;
  if (pr.delta_from_first >= kRateRefIntervalNs) update_rate_reset(bfqd, rq, now);
  else pr.last_dispatch = now;
}

// bfq_completed_request's part: a completion long after the previous one,
// for the size of the requests, means the device went idle; the interval
// ends there rather than average the idle time in.
void peak_rate_on_completion(BfqData* bfqd, uint64_t now) {
  PeakRate& pr = bfqd->pr;
  const uint64_t delta_us = now > pr.last_completion ? (now - pr.last_completion) / 1000 : 0;
  if (delta_us > kMinTtNs / 1000 && (pr.last_rq_max_size << kRateShift) / delta_us < (1ull << (kRateShift - 10)))
    update_rate_reset(bfqd, nullptr, now);
  pr.last_completion = now;
}

// bfq_wr_duration.
uint64_t wr_duration(const BfqData* bfqd) {
  const unsigned i = rot_index(bfqd);
  const uint64_t dur = kRefRate[i] * kRefWrDurationNs[i] / std::max<uint64_t>(1, bfqd->pr.rate);
  return std::clamp(dur, kMinWrDurationNs, kMaxWrDurationNs);
}

}  // namespace blkmq::bfq

// The library example of README.md, built so that it stays true.
#include <blkmq/blkmq.h>

static blkmq::BlkStatus my_queue_rq(blkmq::HwCtx*, const blkmq::QueueData& bd) {
  blkmq::start_request(bd.rq);
  // ... move data with blkmq::rq_for_each_segment(bd.rq, ...) ...
  blkmq::end_request(bd.rq, blkmq::BlkStatus::ok);
  return blkmq::BlkStatus::ok;
}

int main() {
  static blkmq::DriverOps ops;
  ops.queue_rq = my_queue_rq;
  blkmq::TagSetConfig tc;
  tc.ops = &ops;
  tc.queue_depth = 64;
  auto set = blkmq::TagSet::create(tc);            // Result<...>: check set.is_ok()
  blkmq::QueueConfig qc;
  qc.limits.capacity_sectors = 1 << 21;            // 1 GiB
  auto q = blkmq::Queue::create(*set.value(), qc);
  q.value()->set_attr("queue/rq_affinity", "2");   // sysfs names, checked values
  char buf[4096];
  return q.value()->read_sync(buf, 0, sizeof buf) == blkmq::BlkStatus::ok ? 0 : 1;
}

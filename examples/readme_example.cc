// The library example of README.md, built so that it stays true.
#include <blkmq/blkmq.h>
#include <blkmq/driver/driver.h>  // DriverOps, start_request, end_request

#include <cstdio>

static blkmq::BlkStatus my_queue_rq(blkmq::HwCtx*, const blkmq::QueueData& bd) {
  blkmq::start_request(bd.rq);
  // ... move data with blkmq::rq_for_each_segment(bd.rq, ...) ...
  blkmq::end_request(bd.rq, blkmq::BlkStatus::ok);
  return blkmq::BlkStatus::ok;
}

static int failed(const char* what, const blkmq::Status& st) {
  std::fprintf(stderr, "%s: %s\n", what, st.message().c_str());
  return 1;
}

int main() {
  static blkmq::DriverOps ops;
  ops.queue_rq = my_queue_rq;
  blkmq::TagSetConfig tc;
  tc.ops = &ops;
  tc.queue_depth = 64;
  auto set = blkmq::TagSet::create(tc);            // Result<std::unique_ptr<TagSet>>
  if (!set) return failed("tag set", set.status());
  blkmq::QueueConfig qc;
  qc.limits.capacity_sectors = 1 << 21;            // 1 GiB
  auto q = blkmq::Queue::create(**set, qc);
  if (!q) return failed("queue", q.status());
  // sysfs names, checked values: a bad one is an error, not ignored
  if (blkmq::Status st = (*q)->set_attr("queue/rq_affinity", "2"); !st) return failed("rq_affinity", st);
  char buf[4096];
  return (*q)->read_sync(buf, 0, sizeof buf) == blkmq::BlkStatus::ok ? 0 : 1;
}

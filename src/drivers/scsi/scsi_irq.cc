#include "drivers/scsi/scsi_irq.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "base/clock.h"
#include "base/thread.h"
#include "blkmq/driver/context.h"
#include "blkmq/driver/driver.h"

namespace blkmq::scsi {
namespace {

inline ScsiCmd* cmd_of(Request* rq) { return rq->pdu_as<ScsiCmd>(); }

}  // namespace

ScsiIrq::ScsiIrq(unsigned host_no, uint64_t latency_ns) : latency_ns_(latency_ns) {
  base::ThreadOptions opts;
  opts.name = "scsi-irq/" + std::to_string(host_no);
  // An interrupt preempts ordinary work; ask for it where permitted.
  opts.high_priority = true;
  thread_ = base::start_thread(opts, [this] { loop(); });
}

ScsiIrq::~ScsiIrq() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void ScsiIrq::post(Request* rq, BlkStatus st) {
  ScsiCmd* cmd = cmd_of(rq);
  cmd->status = st;
  bool was_empty;
  {
    std::lock_guard lk(mu_);
    // Monotonic due times keep the list sorted without searching it.
    last_due_ns_ = std::max(last_due_ns_, base::now_ns() + latency_ns_);
    cmd->due_ns = last_due_ns_;
    was_empty = pending_.empty();
    pending_.push_back(&rq->queuelist);
  }
  // A thread already waiting for an earlier due time needs no wake-up.
  if (was_empty) cv_.notify_one();
}

void ScsiIrq::loop() {
  std::unique_lock lk(mu_);
  for (;;) {
    if (pending_.empty()) {
      if (stop_) return;
      cv_.wait(lk);
      continue;
    }
    const uint64_t now = base::now_ns();
    const uint64_t first_due = cmd_of(rq_of(pending_.next))->due_ns;
    if (first_due > now) {
      cv_.wait_for(lk, std::chrono::nanoseconds(first_due - now));
      continue;
    }
    // Everything due goes in one "interrupt", as an HBA coalesces.
    ListNode batch;
    while (!pending_.empty() && cmd_of(rq_of(pending_.next))->due_ns <= now) {
      ListNode* n = pending_.next;
      ListNode::unlink(n);
      batch.push_back(n);
    }
    lk.unlock();
    fire(&batch);
    lk.lock();
  }
}

void ScsiIrq::fire(ListNode* batch) {
  HardirqScope irq;
  while (!batch->empty()) {
    ListNode* n = batch->next;
    // Unlinked first: once completed, the request may be reused at once.
    ListNode::unlink(n);
    Request* rq = rq_of(n);
    complete_request(rq, cmd_of(rq)->status);
  }
}

}  // namespace blkmq::scsi

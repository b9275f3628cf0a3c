// The per-hw-queue server threads ("ublk-srv/N"): pop requests off the ring
// that queue_rq fills, hand them to the target, sleep when there is nothing
// to do. The sleep/wake protocol is a Dekker pair: the server publishes
// "sleeping" and then rechecks the ring; a producer publishes its request
// and then checks "sleeping". With a full fence on both sides at least one
// of them sees the other, so no request is left behind a sleeping server.
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/event.h"
#include "base/thread.h"
#include "blkmq/driver/context.h"
#include "drivers/ublk/ublk_dev.h"

namespace blkmq::ublkd {

UblkServer::UblkServer(UblkDevice* dev, unsigned q, unsigned depth)
    : dev_(dev), q_(q), ring_(2 * depth + 2) {}

UblkServer::~UblkServer() {
  stop();
  if (wake_fd_ >= 0) close(wake_fd_);
}

Status UblkServer::start(bool pin) {
  hooks_ = dynamic_cast<ServerHooks*>(dev_->target());
  if (hooks_) {
    wake_fd_ = eventfd(0, EFD_CLOEXEC);
    if (wake_fd_ < 0) return Status::error(errno, std::string("ublk: eventfd: ") + strerror(errno));
  }
  base::ThreadOptions o;
  o.name = "ublk-srv/" + std::to_string(q_);
  if (pin) o.pin_cpu = static_cast<int>(q_ % nr_cpu_ids());
  base::Completion ready;
  thread_ = base::start_thread(o, [this, &ready] {
    init_status_ = dev_->target()->init_queue(q_);
    const bool ok = init_status_.ok();
    ready.complete();  // `ready` dies once start() returns: touch it no more
    if (ok) run();
  });
  ready.wait();
  started_ = true;
  if (!init_status_) {
    thread_.join();
    started_ = false;
    return init_status_;
  }
  return Status::OK();
}

void UblkServer::stop() {
  if (!started_) return;
  started_ = false;
  // Pairs with loop()'s read of stop_ after its sleeping_ store and fence:
  // either it sees the stop, or wake() below sees it asleep.
  stop_.store(true, std::memory_order_seq_cst);
  wake();
  thread_.join();
}

bool UblkServer::post(Request* rq) {
  if (!ring_.push(rq)) [[unlikely]] return false;
  // The request pushed, then sleeping_ read. Pairs with loop()'s fence (its
  // sleeping_ set, then the ring read): either the server sees the request,
  // or this sees it asleep and wakes it.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  // Plain load first: while the server is busy this is the whole cost.
  if (sleeping_.load(std::memory_order_relaxed)) wake();
  return true;
}

void UblkServer::wake() {
  // Only the producer that flips the flag pays for the system call. Pairs
  // with loop()'s sleeping_ store (the RMW decides who wakes; seq_cst keeps
  // it in the order of post()'s and loop()'s fences).
  if (sleeping_.exchange(0, std::memory_order_seq_cst) == 0) return;
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    // Cannot fail short of a counter overflow, which one write per sleep
    // never reaches.
    [[maybe_unused]] ssize_t n = write(wake_fd_, &one, sizeof(one));
  } else {
    base::futex_wake(&sleeping_, 1);
  }
}

void UblkServer::run() {
  loop();
  dev_->target()->exit_queue(q_);
}

unsigned UblkServer::drain() {
  unsigned n = 0;
  UblkTarget* t = dev_->target();
  IoCompBatch iob;
  ublk_pass_batch() = &iob;
  while (Request* rq = ring_.pop()) {
    t->handle(*to_cmd(rq));
    n++;
  }
  ublk_pass_batch() = nullptr;
  end_request_batch(&iob);
  return n;
}

void UblkServer::loop() {
  for (;;) {
    if (drain()) {
      if (hooks_) hooks_->after_batch(q_);
      continue;
    }
    sleeping_.store(1, std::memory_order_seq_cst);  // read by post() and wake()
    // Pairs with post()'s fence (see there), and with stop()'s store of
    // stop_ read below.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (ring_.has_ready()) {
      sleeping_.store(0, std::memory_order_relaxed);
      continue;
    }
    // The device stops the servers only after its queue drained, so an
    // empty ring here means nothing is left to hand out.
    if (stop_.load(std::memory_order_seq_cst)) {  // pairs with stop()
      sleeping_.store(0, std::memory_order_relaxed);
      return;
    }
    sleep();
    sleeping_.store(0, std::memory_order_relaxed);
  }
}

void UblkServer::sleep() {
  if (hooks_) {
    hooks_->wait(q_, wake_fd_);
    return;
  }
  // Returns at once if a producer already cleared the flag.
  base::futex_wait(&sleeping_, 1);
}

}  // namespace blkmq::ublkd

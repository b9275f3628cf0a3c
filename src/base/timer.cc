#include "base/timer.h"

#include <unistd.h>

#include <cassert>
#include <chrono>

#include "base/clock.h"
#include "base/thread.h"

namespace blkmq::base {

namespace {

pid_t current_tid() {
  thread_local pid_t tid = gettid();
  return tid;
}

}  // namespace

// ---- Timer -----------------------------------------------------------------

Timer::~Timer() {
  if (thread_) cancel_sync();
}

void Timer::init(TimerThread* thread, std::function<void()> fn) {
  thread_ = thread ? thread : &TimerThread::global();
  fn_ = std::move(fn);
}

void Timer::arm_at(uint64_t when_ns) {
  assert(thread_ && "Timer::init() before arming");
  std::lock_guard<std::mutex> g(thread_->mu_);
  thread_->remove_locked(this);
  thread_->add_locked(this, when_ns);
}

void Timer::arm_after(uint64_t delay_ns) { arm_at(now_ns() + delay_ns); }

bool Timer::arm_if_earlier(uint64_t when_ns) {
  assert(thread_ && "Timer::init() before arming");
  std::lock_guard<std::mutex> g(thread_->mu_);
  if (queued_ && expires_.load(std::memory_order_relaxed) <= when_ns) return false;
  thread_->remove_locked(this);
  thread_->add_locked(this, when_ns);
  return true;
}

bool Timer::cancel() {
  if (!thread_) return false;
  std::lock_guard<std::mutex> g(thread_->mu_);
  return thread_->remove_locked(this);
}

// Loops because a running callback may re-arm its own timer: only "not
// queued and not running" is final.
void Timer::cancel_sync() {
  if (!thread_) return;
  std::unique_lock<std::mutex> lk(thread_->mu_);
  for (;;) {
    thread_->remove_locked(this);
    if (thread_->running_ != this || thread_->on_this_thread()) return;
    thread_->running_cv_.wait(lk);
  }
}

bool Timer::armed() const {
  if (!thread_) return false;
  std::lock_guard<std::mutex> g(thread_->mu_);
  return queued_;
}

// ---- TimerThread -----------------------------------------------------------

TimerThread::TimerThread(std::string name, bool hardirq_context)
    : hardirq_(hardirq_context), name_(std::move(name)) {
  thread_ = start_thread(ThreadOptions{name_, -1, false}, [this] { run(); });
}

TimerThread::~TimerThread() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
    for (Entry& e : heap_) e.t->queued_ = false;
    heap_.clear();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

TimerThread& TimerThread::global() {
  // Never destroyed: timers owned by static objects may still be cancelled
  // during exit.
  static TimerThread* t = new TimerThread("blkmq-timer");
  return *t;
}

bool TimerThread::on_this_thread() const {
  return tid_.load(std::memory_order_relaxed) == current_tid();
}

bool TimerThread::before(size_t a, size_t b) const {
  const Entry& x = heap_[a];
  const Entry& y = heap_[b];
  return x.when < y.when || (x.when == y.when && x.seq < y.seq);
}

void TimerThread::place(size_t i, const Entry& e) {
  heap_[i] = e;
  e.t->heap_index_ = i;
}

void TimerThread::sift_up(size_t i) {
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!before(i, parent)) break;
    Entry tmp = heap_[parent];
    place(parent, heap_[i]);
    place(i, tmp);
    i = parent;
  }
}

void TimerThread::sift_down(size_t i) {
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < heap_.size() && before(l, m)) m = l;
    if (r < heap_.size() && before(r, m)) m = r;
    if (m == i) break;
    Entry tmp = heap_[m];
    place(m, heap_[i]);
    place(i, tmp);
    i = m;
  }
}

void TimerThread::add_locked(Timer* t, uint64_t when) {
  t->seq_ = next_seq_++;
  t->queued_ = true;
  t->expires_.store(when, std::memory_order_relaxed);
  heap_.push_back(Entry{when, t->seq_, t});
  t->heap_index_ = heap_.size() - 1;
  sift_up(heap_.size() - 1);
  // Only a new earliest expiry changes how long the thread should sleep.
  if (heap_[0].t == t) cv_.notify_one();
}

bool TimerThread::remove_locked(Timer* t) {
  if (!t->queued_) return false;
  size_t i = t->heap_index_;
  assert(i < heap_.size() && heap_[i].t == t);
  t->queued_ = false;
  Entry last = heap_.back();
  heap_.pop_back();
  if (i < heap_.size()) {
    place(i, last);
    sift_down(i);
    sift_up(last.t->heap_index_);
  }
  return true;
}

void TimerThread::run() {
  tid_.store(current_tid(), std::memory_order_relaxed);
  std::unique_lock<std::mutex> lk(mu_);
  while (!stop_) {
    if (heap_.empty()) {
      cv_.wait(lk);
      continue;
    }
    uint64_t now = now_ns();
    uint64_t when = heap_[0].when;
    if (when > now) {
      cv_.wait_for(lk, std::chrono::nanoseconds(when - now));
      continue;
    }
    Timer* t = heap_[0].t;
    remove_locked(t);
    running_ = t;
    lk.unlock();
    t->fn_();  // without the lock: the callback may re-arm or cancel timers
    lk.lock();
    running_ = nullptr;
    running_cv_.notify_all();
  }
}

}  // namespace blkmq::base

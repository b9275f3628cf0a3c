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
  if (queue_) cancel_sync();
}

void Timer::init(TimerQueue* queue, std::function<void()> fn) {
  queue_ = queue ? queue : &TimerThread::global();
  fn_ = std::move(fn);
}

void Timer::arm_at(uint64_t when_ns) {
  assert(queue_ && "Timer::init() before arming");
  std::lock_guard<std::mutex> g(queue_->mu_);
  queue_->remove_locked(this);
  queue_->add_locked(this, when_ns);
}

void Timer::arm_after(uint64_t delay_ns) {
  assert(queue_ && "Timer::init() before arming");
  arm_at(queue_->now_ns() + delay_ns);
}

bool Timer::arm_if_earlier(uint64_t when_ns) {
  assert(queue_ && "Timer::init() before arming");
  std::lock_guard<std::mutex> g(queue_->mu_);
  if (queued_ && expires_.load(std::memory_order_relaxed) <= when_ns) return false;
  queue_->remove_locked(this);
  queue_->add_locked(this, when_ns);
  return true;
}

bool Timer::cancel() {
  if (!queue_) return false;
  std::lock_guard<std::mutex> g(queue_->mu_);
  return queue_->remove_locked(this);
}

// Loops because a running callback may re-arm its own timer: only "not
// queued and not running" is final.
void Timer::cancel_sync() {
  if (!queue_) return;
  std::unique_lock<std::mutex> lk(queue_->mu_);
  for (;;) {
    queue_->remove_locked(this);
    if (queue_->running_ != this || queue_->on_this_thread()) return;
    queue_->running_cv_.wait(lk);
  }
}

bool Timer::armed() const {
  if (!queue_) return false;
  std::lock_guard<std::mutex> g(queue_->mu_);
  return queued_;
}

// ---- TimerQueue ------------------------------------------------------------

TimerQueue::~TimerQueue() {
  std::lock_guard<std::mutex> g(mu_);
  clear_locked();
}

void TimerQueue::clear_locked() {
  for (Entry& e : heap_) e.t->queued_ = false;
  heap_.clear();
}

bool TimerQueue::on_this_thread() const { return tid_.load(std::memory_order_relaxed) == current_tid(); }
void TimerQueue::set_firing_thread() { tid_.store(current_tid(), std::memory_order_relaxed); }
void TimerQueue::clear_firing_thread() { tid_.store(0, std::memory_order_relaxed); }

bool TimerQueue::before(size_t a, size_t b) const {
  const Entry& x = heap_[a];
  const Entry& y = heap_[b];
  return x.when < y.when || (x.when == y.when && x.seq < y.seq);
}

void TimerQueue::place(size_t i, const Entry& e) {
  heap_[i] = e;
  e.t->heap_index_ = i;
}

void TimerQueue::sift_up(size_t i) {
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!before(i, parent)) break;
    Entry tmp = heap_[parent];
    place(parent, heap_[i]);
    place(i, tmp);
    i = parent;
  }
}

void TimerQueue::sift_down(size_t i) {
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

void TimerQueue::add_locked(Timer* t, uint64_t when) {
  t->seq_ = next_seq_++;
  t->queued_ = true;
  t->expires_.store(when, std::memory_order_relaxed);
  heap_.push_back(Entry{when, t->seq_, t});
  t->heap_index_ = heap_.size() - 1;
  sift_up(heap_.size() - 1);
  // Only a new earliest expiry changes how long a firing thread sleeps.
  if (heap_[0].t == t) earliest_changed();
}

bool TimerQueue::remove_locked(Timer* t) {
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

uint64_t TimerQueue::next_locked() const { return heap_.empty() ? UINT64_MAX : heap_[0].when; }

bool TimerQueue::fire_one(std::unique_lock<std::mutex>& lk, uint64_t now, uint64_t* next) {
  if (heap_.empty() || heap_[0].when > now) {
    if (next) *next = next_locked();
    return false;
  }
  Timer* t = heap_[0].t;
  remove_locked(t);
  running_ = t;
  lk.unlock();
  t->fn_();  // without the lock: the callback may re-arm or cancel timers
  lk.lock();
  running_ = nullptr;
  running_cv_.notify_all();
  if (next) *next = next_locked();
  return true;
}

// ---- TimerThread -----------------------------------------------------------

TimerThread::TimerThread(std::string name, bool hardirq_context) : TimerQueue(std::move(name), hardirq_context) {
  thread_ = start_thread(ThreadOptions{this->name(), -1, false}, [this] { run(); });
}

TimerThread::~TimerThread() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
    clear_locked();
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

uint64_t TimerThread::now_ns() const { return base::now_ns(); }

void TimerThread::run() {
  set_firing_thread();
  std::unique_lock<std::mutex> lk(mu_);
  while (!stop_) {
    const uint64_t now = now_ns();
    uint64_t next = 0;
    if (fire_one(lk, now, &next)) continue;
    if (next == UINT64_MAX) cv_.wait(lk);
    else cv_.wait_for(lk, std::chrono::nanoseconds(next - now));
  }
}

// ---- ManualTimerQueue ------------------------------------------------------

bool ManualTimerQueue::fire_one_due() {
  std::unique_lock<std::mutex> lk(mu_);
  set_firing_thread();
  const bool fired = fire_one(lk, now_ns(), nullptr);
  clear_firing_thread();
  return fired;
}

uint64_t ManualTimerQueue::next_expiry() const {
  std::lock_guard<std::mutex> g(mu_);
  return next_locked();
}

}  // namespace blkmq::base

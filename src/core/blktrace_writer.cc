#include "core/blktrace_writer.h"

#include <endian.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "base/event.h"
#include "base/percpu.h"
#include "base/thread.h"

namespace blkmq::blktrace {
namespace {

constexpr auto kDrainPeriod = std::chrono::milliseconds(5);

// Which writer the calling thread last announced itself to (by generation,
// so a new writer at a freed one's address is not mistaken for it).
std::atomic<uint64_t> g_generation{0};
thread_local uint64_t tls_announced = 0;
thread_local uint32_t tls_tid = 0;

uint32_t thread_id() {
  if (!tls_tid) tls_tid = static_cast<uint32_t>(syscall(SYS_gettid));
  return tls_tid;
}

Status errno_status(const std::string& what) { return Status::error(errno, what + ": " + std::strerror(errno)); }

bool write_all(int fd, const uint8_t* p, size_t n) {
  while (n) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

uint32_t Writer::current_thread_id() { return thread_id(); }

Writer::Writer(const Filter& f)
    : act_mask_(f.act_mask), start_lba_(f.start_lba), end_lba_(f.end_lba), pid_(f.pid) {}

Filter Writer::filter() const {
  return Filter{act_mask_.load(std::memory_order_relaxed), start_lba_.load(std::memory_order_relaxed),
                end_lba_.load(std::memory_order_relaxed), pid_.load(std::memory_order_relaxed)};
}

void Writer::set_filter(const Filter& f) {
  act_mask_.store(f.act_mask, std::memory_order_relaxed);
  start_lba_.store(f.start_lba, std::memory_order_relaxed);
  end_lba_.store(f.end_lba, std::memory_order_relaxed);
  pid_.store(f.pid, std::memory_order_relaxed);
}

Status Writer::start(const std::string& dir, const std::string& dev_name, uint32_t device,
                     size_t buffer_bytes_per_cpu) {
  if (started()) return Status::error(EBUSY, "blktrace: this writer was started before");
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return errno_status("blktrace: " + dir);
  const unsigned nr_cpus = base::possible_cpus();
  std::vector<int> fds;
  for (unsigned c = 0; c < nr_cpus; c++) {
    const std::string path = dir + "/" + dev_name + ".blktrace." + std::to_string(c);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
      Status st = errno_status("blktrace: " + path);
      for (int f : fds) ::close(f);  // still in the setup state: start may be tried again
      return st;
    }
    fds.push_back(fd);
  }
  prefix_ = dir + "/" + dev_name;
  device_ = device;
  capacity_ = buffer_bytes_per_cpu;
  fds_ = std::move(fds);
  cpus_.reset(new CpuBuffer[nr_cpus]);
  spare_.resize(nr_cpus);
  for (unsigned c = 0; c < nr_cpus; c++) {
    cpus_[c].data.reserve(buffer_bytes_per_cpu);
    spare_[c].reserve(buffer_bytes_per_cpu);
  }
  nr_cpus_ = nr_cpus;
  generation_ = g_generation.fetch_add(1) + 1;
  thread_ = base::start_thread(base::ThreadOptions{"blktrace", -1, false}, [this] { run(); });
  return Status::OK();
}

Result<std::unique_ptr<Writer>> Writer::open(const std::string& dir, const std::string& dev_name, uint32_t device,
                                             size_t buffer_bytes_per_cpu, const Filter& filter) {
  auto w = std::make_unique<Writer>(filter);
  if (Status st = w->start(dir, dev_name, device, buffer_bytes_per_cpu); !st) return st;
  return w;
}

Writer::~Writer() { close(); }

void Writer::close() {
  if (fds_.empty()) return;
  stop_.store(true);
  kick();
  if (thread_.joinable()) thread_.join();
  drain();
  for (int fd : fds_) ::close(fd);
  fds_.clear();
  for (unsigned c = 0; c < nr_cpus_; c++) {
    CpuBuffer& b = cpus_[c];
    b.lock.lock();
    b.closed = true;
    std::vector<uint8_t>().swap(b.data);
    b.lock.unlock();
    std::vector<uint8_t>().swap(spare_[c]);
  }
}

Record Writer::header(unsigned cpu, uint32_t action, uint64_t time_ns, uint16_t pdu_len) const {
  Record r{};
  r.magic = kMagic | kVersion;
  r.time = time_ns;
  r.action = action;
  r.pid = thread_id();
  r.device = device_;
  r.cpu = cpu;
  r.pdu_len = pdu_len;
  return r;
}

void Writer::append(unsigned cpu, const Record& r, const void* pdu, bool numbered) {
  CpuBuffer& b = cpus_[cpu];
  const size_t n = sizeof(Record) + r.pdu_len;
  b.lock.lock();
  if (b.closed || b.data.size() + n > capacity_) {
    b.lock.unlock();
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  Record rec = r;
  if (numbered) rec.sequence = ++b.sequence;  // notify records stay outside the sequence (0)
  const size_t at = b.data.size();
  b.data.resize(at + n);  // within the reserved capacity: no allocation
  std::memcpy(b.data.data() + at, &rec, sizeof rec);
  if (r.pdu_len) std::memcpy(b.data.data() + at + sizeof rec, pdu, r.pdu_len);
  b.lock.unlock();
  // Once per buffer-full at most: a wake-up costs a system call.
  if (at < capacity_ / 2 && at + n >= capacity_ / 2) kick();
}

// A process notify record: the thread's id and name, which blkparse prints
// with each of its events.
void Writer::notify_thread(unsigned cpu, uint64_t time_ns) {
  char comm[kCommLen] = {};
  pthread_getname_np(pthread_self(), comm, sizeof comm);
  append(cpu, header(cpu, kNotifyProcess, time_ns, kCommLen), comm, false);
}

void Writer::add(uint32_t action, uint64_t time_ns, uint64_t sector, uint32_t bytes, uint16_t error,
                 const void* pdu, uint16_t pdu_len) {
  const unsigned cpu = base::this_cpu();
  if (tls_announced != generation_) {
    tls_announced = generation_;
    notify_thread(cpu, time_ns);
  }
  Record r = header(cpu, action, time_ns, pdu_len);
  r.sector = sector;
  r.bytes = bytes;
  r.error = error;
  append(cpu, r, pdu, true);
}

void Writer::add_u64(uint32_t action, uint64_t time_ns, uint64_t sector, uint32_t bytes, uint64_t value) {
  const uint64_t be = htobe64(value);
  add(action, time_ns, sector, bytes, 0, &be, sizeof be);
}

// Swaps each CPU's buffer for its empty spare (both keep their capacity)
// and writes the full one out. Only the writer thread, or the destructor
// after it has stopped.
void Writer::drain() {
  for (unsigned c = 0; c < nr_cpus_; c++) {
    CpuBuffer& b = cpus_[c];
    b.lock.lock();
    b.data.swap(spare_[c]);
    b.lock.unlock();
    if (!spare_[c].empty() && !write_all(fds_[c], spare_[c].data(), spare_[c].size()))
      write_errors_.fetch_add(1, std::memory_order_relaxed);
    spare_[c].clear();
  }
}

void Writer::kick() {
  kick_.fetch_add(1, std::memory_order_release);
  base::futex_wake(&kick_, 1);
}

void Writer::run() {
  const uint64_t period_ns = std::chrono::nanoseconds(kDrainPeriod).count();
  while (!stop_.load()) {
    const uint32_t seen = kick_.load(std::memory_order_acquire);
    const uint64_t want = flush_requests_.load();
    drain();
    flushed_.store(want);
    if (!stop_.load() && flush_requests_.load() == want) base::futex_wait(&kick_, seen, period_ns);
  }
}

void Writer::flush() {
  const uint64_t want = flush_requests_.fetch_add(1) + 1;
  kick();
  while (flushed_.load() < want && !stop_.load()) std::this_thread::sleep_for(std::chrono::microseconds(200));
}

}  // namespace blkmq::blktrace

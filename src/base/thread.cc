// Registered threads and their CPU time per group (base::thread_usage()).
#include "base/thread.h"

#include "base/clock.h"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <string>

namespace blkmq::base {

namespace {

struct LiveThread {
  pid_t tid;
  clockid_t clock;
};

struct Group {
  uint64_t exited_cpu_ns = 0;
  unsigned nr_started = 0;
  std::map<pid_t, LiveThread> live;
};

// Touched only when a thread starts or exits and when usage is reported.
struct Registry {
  std::mutex mu;
  std::map<std::string, Group> groups;
};

Registry& registry() {
  static Registry* r = new Registry;  // outlives threads still exiting at exit()
  return *r;
}

std::string group_of(const std::string& name) { return name.substr(0, name.find('/')); }

// Removes the thread from the living set and banks its CPU time; runs on the
// thread itself as it exits, also when fn throws.
struct Registration {
  std::string group;
  pid_t tid;
  ~Registration() {
    uint64_t cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    Registry& r = registry();
    std::lock_guard<std::mutex> g(r.mu);
    Group& grp = r.groups[group];
    grp.exited_cpu_ns += cpu;
    grp.live.erase(tid);
  }
};

void setup_current(const ThreadOptions& opts) {
  // The kernel limits names to 15 characters; longer ones would be refused.
  pthread_setname_np(pthread_self(), opts.name.substr(0, 15).c_str());
  if (opts.pin_cpu >= 0 && opts.pin_cpu < CPU_SETSIZE) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(opts.pin_cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  }
  // Stand-in for WQ_HIGHPRI; without CAP_SYS_NICE this fails with EACCES or
  // EPERM and the thread simply runs at normal priority.
  if (opts.high_priority) setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), -10);
}

uint64_t read_status_field(const std::string& text, const char* key) {
  size_t pos = text.find(key);
  if (pos == std::string::npos) return 0;
  return std::strtoull(text.c_str() + pos + std::char_traits<char>::length(key), nullptr, 10);
}

}  // namespace

std::thread start_thread(const ThreadOptions& opts, std::function<void()> fn) {
  std::string group = group_of(opts.name);
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> g(r.mu);
    r.groups[group].nr_started++;
  }
  return std::thread([opts, group = std::move(group), fn = std::move(fn)]() mutable {
    setup_current(opts);
    Registration reg{group, gettid()};
    clockid_t clock;
    if (pthread_getcpuclockid(pthread_self(), &clock) != 0) clock = CLOCK_THREAD_CPUTIME_ID;
    {
      Registry& r = registry();
      std::lock_guard<std::mutex> g(r.mu);
      r.groups[group].live[reg.tid] = LiveThread{reg.tid, clock};
    }
    fn();
  });
}

std::map<std::string, ThreadGroupUsage> thread_usage() {
  std::map<std::string, ThreadGroupUsage> out;
  Registry& r = registry();
  // Holding the lock keeps every listed thread alive (it deregisters under
  // the lock before exiting), so its clock id and tid stay valid.
  std::lock_guard<std::mutex> g(r.mu);
  for (const auto& [name, grp] : r.groups) {
    ThreadGroupUsage& u = out[name];
    u.cpu_ns = grp.exited_cpu_ns;
    u.nr_threads = grp.nr_started;
    for (const auto& [tid, lt] : grp.live) {
      u.cpu_ns += clock_ns(lt.clock);
      std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/status");
      std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      u.nvcsw += read_status_field(text, "\nvoluntary_ctxt_switches:");
      u.nivcsw += read_status_field(text, "\nnonvoluntary_ctxt_switches:");
    }
  }
  return out;
}

}  // namespace blkmq::base

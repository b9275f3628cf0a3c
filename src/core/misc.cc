// I/O contexts: a thread's own, and ones applications hold (connections).
#include <atomic>
#include <mutex>
#include <vector>

#include "blkmq/iogroup.h"
#include "blkmq/ioctx.h"
#include "blkmq/status.h"

namespace blkmq {

namespace {

// Thread contexts outlive their threads: a request keeps rq->ioc after its
// submitter exits (a scheduler may read it when a parked request is
// inserted later), so a context is never freed. When its thread exits it
// goes back to this pool and a new thread takes it with a new id: memory is
// bounded by the most threads alive at once.
struct IocPool {
  std::mutex lock;
  std::vector<IoContext*> free;
};
IocPool& ioc_pool() {
  static IocPool* p = new IocPool;  // never destroyed: threads may exit after main
  return *p;
}

IoContext* pool_take() {
  static std::atomic<uint64_t> next_id{1};
  IocPool& p = ioc_pool();
  IoContext* ioc = nullptr;
  {
    std::lock_guard lk(p.lock);
    if (!p.free.empty()) {
      ioc = p.free.back();
      p.free.pop_back();
    }
  }
  if (!ioc) ioc = new IoContext;
  *ioc = IoContext{kIoprioDefault, kIoWeightDefault, next_id.fetch_add(1, std::memory_order_relaxed), nullptr, nullptr};
  return ioc;
}

void pool_give(IoContext* ioc) {
  // A context that goes back to the pool leaves its group, which may then
  // be removed (the kernel's exiting task leaves its cgroup).
  (void)io_context_set_group(ioc, nullptr);  // to the root: cannot fail
  IocPool& p = ioc_pool();
  std::lock_guard lk(p.lock);
  p.free.push_back(ioc);
}

struct ThreadIoc {
  IoContext* ioc = pool_take();
  ~ThreadIoc() { pool_give(ioc); }
};

}  // namespace

IoContext* current_io_context() {
  thread_local ThreadIoc t;
  return t.ioc;
}

IoContext* acquire_io_context() { return pool_take(); }
void release_io_context(IoContext* ioc) { pool_give(ioc); }

}  // namespace blkmq

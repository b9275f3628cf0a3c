// I/O contexts and the device-driver registry.
#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

#include "blkmq/device.h"
#include "blkmq/ioctx.h"
#include "blkmq/status.h"

namespace blkmq {

void register_builtin_drivers();  // src/drivers/builtin.cc

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
  *ioc = IoContext{kIoprioDefault, kIoWeightDefault, next_id.fetch_add(1, std::memory_order_relaxed), nullptr};
  return ioc;
}

void pool_give(IoContext* ioc) {
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

namespace {

std::mutex& drivers_lock() {
  static std::mutex m;
  return m;
}
std::vector<const DeviceDriver*>& drivers() {
  static std::vector<const DeviceDriver*> v;
  return v;
}
const DeviceDriver* find_driver(std::string_view name) {
  register_builtin_drivers();
  std::lock_guard<std::mutex> g(drivers_lock());
  for (const DeviceDriver* d : drivers())
    if (d->name == name) return d;
  return nullptr;
}

}  // namespace

void register_device_driver(const DeviceDriver* drv) {
  std::lock_guard<std::mutex> g(drivers_lock());
  for (const DeviceDriver* d : drivers())
    if (d->name == drv->name) return;
  drivers().push_back(drv);
}

std::vector<std::string> device_drivers() {
  register_builtin_drivers();
  std::lock_guard<std::mutex> g(drivers_lock());
  std::vector<std::string> v;
  for (const DeviceDriver* d : drivers()) v.push_back(d->name);
  return v;
}

std::vector<ParamInfo> device_params(std::string_view driver) {
  const DeviceDriver* d = find_driver(driver);
  return d ? d->params : std::vector<ParamInfo>{};
}

Result<std::unique_ptr<Device>> create_device(std::string_view driver, const ParamMap& params) {
  const DeviceDriver* d = find_driver(driver);
  if (!d) {
    std::string list;
    for (const std::string& n : device_drivers()) list += (list.empty() ? "" : ", ") + n;
    return Status::invalid("unknown driver '" + std::string(driver) + "'; available: " + list);
  }
  ParamMap driver_params;
  std::vector<std::pair<std::string, std::string>> attrs;
  for (const auto& [k, v] : params) {
    if (k.rfind("attr:", 0) == 0) {
      attrs.emplace_back(k.substr(5), v);
      continue;
    }
    bool known = false;
    for (const ParamInfo& p : d->params) known |= p.name == k;
    if (!known) return Status::invalid("driver " + d->name + ": unknown parameter '" + k + "'");
    driver_params.emplace(k, v);
  }
  auto dev = d->create(driver_params);
  if (!dev) return dev.status();
  // queue/scheduler first: queue/iosched/* and nr_requests act on the
  // scheduler that is in place, as they do after `echo NAME > scheduler`.
  std::stable_partition(attrs.begin(), attrs.end(),
                        [](const auto& a) { return a.first == "queue/scheduler"; });
  for (const auto& [path, value] : attrs) {
    if (Status s = dev.value()->queue().set_attr(path, value); !s) return s;
  }
  return std::move(dev.value());
}

}  // namespace blkmq

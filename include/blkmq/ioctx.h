// I/O priorities and per-thread I/O contexts.
#pragma once

#include <cstdint>

namespace blkmq {

class IoGroup;

// ioprio encoding as in the kernel: class in the top 3 bits of 16, level in
// the low bits. Classes: none(0), rt(1), be(2), idle(3); levels 0..7.
enum class IoprioClass : uint8_t { none = 0, rt = 1, be = 2, idle = 3 };
constexpr int kIoprioClassShift = 13;
constexpr uint16_t ioprio_value(IoprioClass c, unsigned level) {
  return static_cast<uint16_t>((static_cast<unsigned>(c) << kIoprioClassShift) | (level & 7));
}
constexpr IoprioClass ioprio_class(uint16_t prio) {
  return static_cast<IoprioClass>(prio >> kIoprioClassShift);
}
constexpr unsigned ioprio_level(uint16_t prio) { return prio & 7; }
constexpr uint16_t kIoprioDefault = 0;  // class none, which schedulers treat as best effort 4
// The weight of a context nobody weighted: the cgroup default
// (CGROUP_WEIGHT_DFL), which bfq maps to its legacy 100 as well.
constexpr uint16_t kIoWeightDefault = 100;

// An I/O context: what the kernel keeps in task->io_context and the blkcg
// weight. Every submitting thread has one (current_io_context()); an NBD
// connection or any other client may own one and attach it to its bios.
// bfq reads ioprio and weight from here, not from the bio.
struct IoContext {
  uint16_t ioprio = kIoprioDefault;
  uint16_t weight = kIoWeightDefault;  // cgroup-style weight, 1..1000
  uint64_t id = 0;            // unique, assigned on first use; never reused
  void* sched_data = nullptr; // owned by the scheduler that set it
  // The I/O group (blkmq/iogroup.h) its bios are charged to; nullptr is the
  // root, so the common case costs one load and no global. Change it only
  // with io_context_set_group(), which keeps the groups' member counts.
  IoGroup* group = nullptr;
};

// The calling thread's I/O context. Task context only; never null. The
// pointer stays valid for the life of the process (requests keep it after
// their submitter exits); once its thread has exited it may be handed to a
// new thread, with a new id. Cost: a thread-local read.
IoContext* current_io_context();

// A context of its own for a client that is not a thread (an NBD
// connection): fresh id, default ioprio and weight 100. The caller may set
// ioprio and weight before its first bio and must not change them while its
// bios are in flight. Release it only after every request that carries it has
// completed; it returns to the pool the thread contexts use and is never
// freed. Any thread; cost: one mutex.
IoContext* acquire_io_context();
void release_io_context(IoContext* ioc);

}  // namespace blkmq

// A live, sysfs-like view of a process's blkmq devices, laid out as
// /sys/block is, so tools written for kernel devices read it:
//   DIR/block/<dev>/stat, inflight, size, ro, dev, queue/*, mq/<n>/*, trace/*
//   (every path Queue::attr_names() lists, with Queue::attr()'s text)
//   DIR/dev/block/<major>:<minor> -> ../../block/<dev>
// `iostat -x -f DIR 1` (sysstat) shows the devices live. The files are
// views: writing them changes nothing (steer a device through its
// attributes, e.g. the control socket's `blkmq attr`).
#pragma once

#include <memory>
#include <string>

#include "blkmq/queue.h"
#include "blkmq/status.h"

namespace blkmq {

class SysfsTree {
 public:
  // Creates DIR (and DIR/block, DIR/dev/block) owner-only (0700; files
  // 0600) and starts the refresher thread. `stat` and `inflight` are
  // rewritten every 50 ms, so a reader sampling once a second (iostat)
  // sees counts at most 50 ms old; the other files every `refresh_ms`
  // (default 1000). Each file is replaced whole (written aside, then
  // renamed), so a reader never sees half of one. Error if DIR cannot be
  // made. Task context.
  static Result<std::unique_ptr<SysfsTree>> open(const std::string& dir, unsigned refresh_ms = 1000);
  // Stops refreshing and removes every device's files (as the kernel's
  // entries go with their devices); DIR itself stays.
  ~SysfsTree();

  // Adds a device: its files are written before this returns. Error if a
  // file cannot be written or a device of that name is already in the
  // tree. The queue must stay alive until remove(). Task context.
  Status add(Queue& q);
  // Removes a device and its files; returns after any refresh that was
  // reading it. Call before destroying the queue. Task context.
  void remove(Queue& q);

  // The tree's directory, as given to open().
  const std::string& dir() const;

 private:
  struct Impl;  // the refresher thread and the files written (sysfs_tree.cc)
  explicit SysfsTree(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace blkmq

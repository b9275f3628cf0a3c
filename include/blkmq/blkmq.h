// Umbrella header for the blkmq library: everything an application uses.
//
// Which header for what:
// - Applications (submit I/O to a device, a file, an rbd image):
//     blkmq/device.h   create a device of a built-in driver by name
//     blkmq/queue.h    the request queue: submit bios, attributes, stats
//     blkmq/bio.h      bios, their ops, flags and completion
//     blkmq/plug.h     batch submissions (blk_start_plug)
//     blkmq/ioctx.h    a thread's I/O priority and bfq weight
//     blkmq/iogroup.h  I/O groups (the blkcg stand-in) contexts belong to
//     blkmq/runtime.h  the execution contexts (kblockd, softirq, timers,
//                      clock); ManualRuntime for deterministic tests
//     blkmq/status.h   Status, Result and the I/O path's BlkStatus
//     blkmq/sysfs_tree.h  a /sys/block-like tree that iostat reads
//     blkmq/zoned.h    zone descriptors, conditions and operations
//   This header includes all of these.
// - Driver authors (a device behind the queue): blkmq/driver/driver.h (the
//   driver ops and the calls a driver makes; it includes request.h),
//   blkmq/driver/tagset.h (hardware queues and tags), blkmq/driver/context.h
//   (hardirq context for a completion thread), blkmq/driver/device_driver.h
//   to have create_device("NAME") build the driver's devices
//   (register_device_driver), and blkmq/driver/ublk.h for a ublk-style
//   target's I/O handler.
// - I/O scheduler authors: blkmq/elevator/elevator.h (the elevator ops,
//   register_elevator, and the helpers a scheduler calls; it includes the
//   driver headers it needs
//   and elevator/rbtree.h, the sort tree).
// The project's version is in CMake's package (blkmq_VERSION) and
// pkg-config's (`pkg-config --modversion blkmq`).
#pragma once

#include "blkmq/bio.h"
#include "blkmq/device.h"
#include "blkmq/ioctx.h"
#include "blkmq/iogroup.h"
#include "blkmq/plug.h"
#include "blkmq/queue.h"
#include "blkmq/runtime.h"
#include "blkmq/status.h"
#include "blkmq/sysfs_tree.h"
#include "blkmq/zoned.h"

// I/O groups: the kernel's blkcg (the cgroup "io" controller) as a
// process-wide tree of named groups that I/O contexts belong to.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "blkmq/bio.h"
#include "blkmq/ioctx.h"
#include "blkmq/status.h"

namespace blkmq {

// A group of the tree ("/", "/a", "/a/b"). Opaque: the core keeps per
// (group, queue) data for it (the kernel's blkg) and the policies' state.
// The root exists for the life of the process; other groups live until
// io_group_remove() and the last bio charged to them has ended.
class IoGroup;

// The root group ("/"). Contexts that were never moved belong to it; its
// io.stat reads the device's own statistics, as the kernel's root does.
// Any thread; never null.
IoGroup* io_group_root();

// Finds the group at `path` ("/a/b"; the leading '/' is optional; "/" or
// "" is the root), creating it and any missing ancestor, as `mkdir -p`
// would (fio's cgroup= creates its group when missing). Each name is 1 to
// 255 bytes, not "." or "..", without '/', blanks or control characters;
// anything else is EINVAL with the offending name. The pointer stays valid
// until the group is removed. Any thread; takes the tree's mutex.
Result<IoGroup*> io_group_create(std::string_view path);

// Whether `path` is well formed for io_group_create (OK) or not (EINVAL,
// as create would say), without creating anything: for a tool that checks
// its options first. Any thread.
Status io_group_check_path(std::string_view path);

// The group at `path`, or nullptr if there is none (or the path is
// malformed). Any thread; takes the tree's mutex.
IoGroup* io_group_find(std::string_view path);

// Removes the group at `path`, as rmdir of a cgroup: ENOENT if there is
// none, EBUSY if it has child groups or contexts still belong to it,
// EINVAL for the root or a malformed path. Bios already charged to it
// still end normally and are accounted: its counts move into its parent's
// (the kernel flushes a dying blkg's stats upwards), and its memory goes
// when the last of them ends. Any thread; takes the tree's mutex.
Status io_group_remove(std::string_view path);

// The group's path, "/" for the root, "/a/b" below it. Any thread.
std::string io_group_path(const IoGroup* g);

// Every group's path, parents before children, siblings by name. Any
// thread; takes the tree's mutex.
std::vector<std::string> io_group_list();

// Moves ioc into group g (nullptr: the root), as writing a pid into
// cgroup.procs. Bios submitted afterwards are charged to g; those already
// submitted stay with the group they were charged to. Called by the thread
// that submits with ioc (its own thread context, or the owner of an
// acquired one), between bios, as ioprio and weight are set. A context
// keeps its group alive: io_group_remove() refuses a group with members.
// ENOENT (and no change) if g was removed. Takes the tree's mutex.
Status io_context_set_group(IoContext* ioc, IoGroup* g);

// ioc's group (never null: the root if it was never moved). Any thread.
IoGroup* io_context_group(const IoContext* ioc);

// ---- for policies that keep per-group state (bfq's groups) ----

// The group a bio in flight was charged to (the kernel's bio_blkcg), or
// nullptr when it was charged to none: the root, or a group removed before
// the charge. The charge holds the group, so the pointer stays valid until
// the bio ends. Any context; a load, plus one when charged.
IoGroup* bio_io_group(const Bio* bio);

// g's parent, nullptr for the root. Fixed for g's life. Any context.
IoGroup* io_group_parent(const IoGroup* g);

// False once g was removed (io_group_remove); a policy then lets go of its
// state for g. Any context; an atomic load.
bool io_group_online(const IoGroup* g);

// References on a group: a holder keeps the pointer valid (not the group
// in the tree) until its put. Any context; the last put frees it.
void io_group_get(IoGroup* g);
void io_group_put(IoGroup* g);

// The group's bfq weight for every device (io.bfq.weight's "default",
// the kernel's bfq_group_data weight): 1..1000, 100 until set. bfq reads it
// when the group's entity is (re)queued. Any context; an atomic.
constexpr unsigned kIoGroupWeightMin = 1, kIoGroupWeightMax = 1000, kIoGroupWeightDefault = 100;
unsigned io_group_bfq_weight(const IoGroup* g);
// Sets it; EINVAL (and no change) outside 1..1000 or for the root, which
// has no weight (the kernel has no io.bfq.weight in the root cgroup).
Status io_group_set_bfq_weight(IoGroup* g, unsigned weight);

// The group's io.cost weight for every device (io.weight's "default", the
// kernel's ioc_cgrp dfl_weight): 1..10000, 100 until set. io.cost reads
// it at each period's end. Any context; an atomic.
constexpr unsigned kIoGroupCostWeightMax = 10000;
unsigned io_group_cost_weight(const IoGroup* g);
// Sets it; EINVAL (and no change) outside 1..10000 or for the root, which
// has no io.weight in cgroup v2.
Status io_group_set_cost_weight(IoGroup* g, unsigned weight);

}  // namespace blkmq

// A registry of named things, the one behind register_device_driver()
// (blkmq/driver/device_driver.h) and register_elevator()
// (blkmq/elevator/elevator.h): both hold their entries here, so both refuse
// a taken name the same way (EEXIST, naming the thing and the name).
//
// Built-ins. A built-in driver or scheduler registers in one line in its
// own folder:
//
//   BLKMQ_BUILTIN(blkmq::DeviceDriver, driver, null, 0, {"null", &create, infos()});
//
// which defines the global `blkmq_builtin_driver_null`. CMake generates a
// table of every folder's entry (blkmq_builtin_table in CMakeLists.txt),
// and the registry adds the table's entries when it is first used. Why a
// generated table and not a static initializer per driver: a linker takes
// an object out of a static library (libblkmq.a) only when something
// refers to it, so an outside program would lose every driver that only
// registered itself; a list kept by hand is one more place to forget. The
// registry refers to the table and the table to every entry, so whoever
// uses the registry links them all, with no linker flags.
//
// Out-of-tree drivers and schedulers call the public register functions,
// from main() or from a static initializer of their own (their objects
// are linked directly, not taken from an archive).
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "blkmq/status.h"

namespace blkmq::base {

// One built-in entry, constant-initialized (so usable whatever the order of
// static initialization): its place among the built-ins and how to make it.
template <typename T>
struct Builtin {
  // Built-ins are added by rank, lowest first, then in table order (the
  // folders' names); names() lists them so (queue/scheduler's order).
  int rank;
  // Called once, with the registry's lock held: must not use the registry.
  T (*make)();
};

// The generated table of a kind's built-ins.
template <typename T>
using BuiltinTable = std::span<const Builtin<T>* const>;

// A thread-safe name -> entry map that keeps registration order. T has a
// std::string `name`, and optionally a std::string `alias` (another name
// that finds it; empty: none). Entries are not owned (a registrant keeps
// its T alive for the process), except built-ins, which the registry
// makes and keeps. Nothing is ever removed.
template <typename T>
class Registry {
 public:
  // kind: what messages call an entry ("driver", "elevator"). check: what
  // every entry must satisfy besides a free name (its required hooks), or
  // nullptr. Adds the built-ins; one that fails check or takes a taken
  // name is a bug of this library: it is reported on stderr and aborts,
  // on the first use of the registry, so any test finds it. Any thread;
  // meant for a function-local static, built on first use.
  Registry(std::string kind, BuiltinTable<T> builtins, Status (*check)(const T&))
      : kind_(std::move(kind)), check_(check) {
    std::vector<const Builtin<T>*> order(builtins.begin(), builtins.end());
    std::stable_sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->rank < b->rank; });
    std::lock_guard<std::mutex> g(lock_);
    for (const Builtin<T>* b : order) {
      const T& made = builtins_.emplace_back(b->make());
      Status st = check_ ? check_(made) : Status::OK();
      if (st) st = add_locked(&made);
      if (!st) {
        std::fprintf(stderr, "blkmq: built-in %s '%s' cannot register: %s\n", kind_.c_str(),
                     made.name.c_str(), st.message().c_str());
        std::abort();
      }
    }
  }
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Adds *item, which must outlive every use of the registry. EEXIST when
  // its name or alias is one another entry answers to ("KIND 'NAME' is
  // already registered"); check's error when it fails that; EINVAL for
  // nullptr. Any thread; O(entries).
  Status add(const T* item) {
    if (!item) return Status::invalid(kind_ + ": nullptr instead of an entry");
    if (check_)
      if (Status st = check_(*item); !st) return st;
    std::lock_guard<std::mutex> g(lock_);
    return add_locked(item);
  }

  // The entry whose name or alias is `name`; nullptr if none. Any thread;
  // O(entries), under a lock held for the search only.
  const T* find(std::string_view name) const {
    std::lock_guard<std::mutex> g(lock_);
    for (const T* t : items_)
      if (answers_to(*t, name)) return t;
    return nullptr;
  }

  // Every entry's name (not its alias), in registration order. Any thread.
  std::vector<std::string> names() const {
    std::lock_guard<std::mutex> g(lock_);
    std::vector<std::string> v;
    for (const T* t : items_) v.push_back(t->name);
    return v;
  }

 private:
  static std::string_view alias_of(const T& t) {
    if constexpr (requires { t.alias; }) {
      return t.alias;
    } else {
      return {};
    }
  }
  static bool answers_to(const T& t, std::string_view name) {
    return t.name == name || (!alias_of(t).empty() && alias_of(t) == name);
  }

  Status add_locked(const T* item) {
    const std::string_view alias = alias_of(*item);
    for (const T* t : items_) {
      if (answers_to(*t, item->name))
        return Status::error(EEXIST, kind_ + " '" + item->name + "' is already registered");
      if (!alias.empty() && answers_to(*t, alias))
        return Status::error(EEXIST, kind_ + " '" + item->name + "': its alias '" + std::string(alias) +
                                         "' names " + kind_ + " '" + t->name + "'");
    }
    items_.push_back(item);
    return Status::OK();
  }

  const std::string kind_;
  Status (*const check_)(const T&);
  mutable std::mutex lock_;
  std::deque<T> builtins_;        // the built-ins this registry made; deque: addresses stay
  std::vector<const T*> items_;  // every entry, in registration order
};

}  // namespace blkmq::base

// Defines built-in `folder`'s entry of `kind`: the global
// blkmq_builtin_<kind>_<folder>, which the table CMake generates from the
// folders of the kind's layer refers to. One use per folder, at global
// namespace scope (so names in the value are written in full); the value
// is what make() returns, a T or a braced list for one.
#define BLKMQ_BUILTIN(Type, kind, folder, rank, ...)                                  \
  extern const ::blkmq::base::Builtin<Type> blkmq_builtin_##kind##_##folder;          \
  constinit const ::blkmq::base::Builtin<Type> blkmq_builtin_##kind##_##folder{       \
      rank, []() -> Type { return __VA_ARGS__; }}

// A test's thread in an I/O group for a scope (the qos tests).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "blkmq/iogroup.h"

namespace blkmq::test {

// Puts the calling thread's context in `path` (made if missing) for the
// life of the object, and back in the root after, so the group can be
// removed. On the thread that submits.
struct InGroup {
  explicit InGroup(const std::string& path) {
    auto g = io_group_create(path);
    EXPECT_TRUE(g.ok());
    EXPECT_TRUE(io_context_set_group(current_io_context(), *g).ok());
  }
  ~InGroup() { EXPECT_TRUE(io_context_set_group(current_io_context(), nullptr).ok()); }
  InGroup(const InGroup&) = delete;
  InGroup& operator=(const InGroup&) = delete;
};

}  // namespace blkmq::test

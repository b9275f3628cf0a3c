// A throw-away Ceph cluster (tests/support/ceph_cluster.sh) for the rbd
// driver's tests: started in a temporary directory, stopped by the pids
// the script recorded. Where Ceph is not installed or does not come up,
// up() is false and reason() says why, for GTEST_SKIP.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

#include "support/cli_process.h"

namespace blkmq::test {

class CephCluster {
 public:
  // Starts the cluster with pool "rbd" and an image "img" of `image_mib`
  // MiB. Takes about 10 s; at most 120 s before it gives up.
  explicit CephCluster(unsigned image_mib = 1024) {
    char tmpl[] = "/tmp/blkmq-ceph-XXXXXX";
    if (!mkdtemp(tmpl)) {
      reason_ = "mkdtemp failed";
      return;
    }
    dir_ = tmpl;
    Shell r = sh(script() + " start " + dir_ + " " + std::to_string(image_mib), 120);
    if (r.status != 0) {
      reason_ = "no Ceph cluster (" + std::to_string(r.status) + "): " + r.output;
      return;
    }
    conf_ = dir_ + "/ceph.conf";
  }
  ~CephCluster() {
    if (!dir_.empty()) sh(script() + " stop " + dir_, 60);
  }
  CephCluster(const CephCluster&) = delete;
  CephCluster& operator=(const CephCluster&) = delete;

  bool up() const { return !conf_.empty(); }
  const std::string& reason() const { return reason_; }
  const std::string& conf() const { return conf_; }
  // SIGKILLs the OSD: the cluster stops answering I/O.
  void kill_osd() { EXPECT_EQ(sh(script() + " kill-osd " + dir_, 30).status, 0); }
  // `rbd ARGS` against this cluster; its exit status.
  Shell rbd(const std::string& args) { return sh("rbd -c " + conf_ + " " + args, 60); }

 private:
  static std::string script() { return std::string(BLKMQ_SOURCE_DIR) + "/tests/support/ceph_cluster.sh"; }

  std::string dir_, conf_, reason_;
};

}  // namespace blkmq::test

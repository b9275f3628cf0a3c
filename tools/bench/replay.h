// Replaying a blktrace capture (fio's read_iolog with a blktrace binary
// file): the queued (Q) reads and writes of the trace, in its order, with
// the time between them. The file is one stream, as fio takes it: a single
// CPU's file, or the per-CPU files merged by `blkparse -i PREFIX -d FILE`.
// Records of either byte order (the kernel writes the tracing machine's);
// every device in the trace is replayed onto the job's one device, as
// fio's replay_redirect does.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "blkmq/status.h"

namespace bench {

// fio's replay_* options that apply to one target device.
struct ReplayOptions {
  bool no_stall = false;        // replay_no_stall: issue as fast as the depth allows
  unsigned time_scale = 100;    // replay_time_scale: percent of the recorded gaps
  uint64_t align = 0;           // replay_align: offsets aligned down to this (bytes, power of two)
  unsigned scale = 1;           // replay_scale: offsets divided by this
};

struct ReplayIo {
  uint64_t offset;   // bytes
  uint32_t len;      // bytes
  bool write;
  uint64_t time_ns;  // since the trace's first replayed event
};

struct ReplayTrace {
  std::vector<ReplayIo> ios;
  uint32_t max_len = 0;
  uint64_t skipped = 0;  // queued discards and flushes, not replayed (as fio without trim)
};

// Reads `path`. Error if it is not a blktrace file (no version 7 magic in
// the first record), is cut inside a record, or holds no read or write.
// Control thread, before the job runs.
blkmq::Result<ReplayTrace> load_blktrace(const std::string& path, const ReplayOptions& o);

}  // namespace bench

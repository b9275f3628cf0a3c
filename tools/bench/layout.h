// Laying out a job file that does not exist yet, as fio does before a run.
#pragma once

#include "blkmq/status.h"
#include "bench/options.h"

namespace bench {

// The byte the job buffers are filled with (Job::prepare), and so what a
// file laid out for reading holds: fio writes its buffer contents too.
inline constexpr unsigned char kBufferFill = 0xa5;

// When the driver's `filename` does not exist and the jobs give a --size,
// creates it at the jobs' extent (the largest offset + size over clones)
// before the device opens it, and says so on stderr in fio's words
// ("NAME: Laying out IO file (1 file / NMiB)"). As fio: the blocks are
// allocated (posix_fallocate); when a job reads (a read or mixed job, or a
// replayed trace), the whole file is then written with kBufferFill and
// fsynced (fio's create_fsync=1), so reads reach the disk instead of
// returning zeros from unwritten extents; write-only jobs leave it
// allocated but unwritten, which they overwrite anyway. Without a job
// --size nothing is done (the driver's own rules apply). A file that cannot
// be made is removed and its error returned. Control thread; costs a
// write of the whole file when a job reads.
blkmq::Status lay_out_missing_file(const BenchConfig& cfg);

}  // namespace bench

// blkmq bench options: fio's names and value syntax, parsed into a
// BenchConfig (run-wide settings plus one JobSpec per job section).
//
// Every option is applied by one function of (key, value), so the command
// line and fio job files ([global] + job sections, see jobfile.h) share the
// same parsing and validation.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "blkmq/device.h"
#include "blkmq/status.h"
#include "bench/zbd.h"
#include "bench/cycle.h"
#include "bench/replay.h"

namespace bench {

using blkmq::Status;

enum class RwMode : uint8_t { read, write, randread, randwrite, rw, randrw };
enum class IoEngine : uint8_t { io_uring, libaio, psync, sync };
enum class VerifyMode : uint8_t { none, crc32c };
// Report formats, a set as fio's --output-format=normal,json takes one.
// json_plus is fio's json+: JSON plus the clat histogram bins.
enum class OutputFormat : uint8_t { normal = 1, json = 2, json_plus = 4 };

constexpr OutputFormat operator|(OutputFormat a, OutputFormat b) {
  return static_cast<OutputFormat>(static_cast<uint8_t>(a) | static_cast<uint8_t>(b));
}
// True when the set `formats` holds `f`.
constexpr bool has_format(OutputFormat formats, OutputFormat f) {
  return (static_cast<uint8_t>(formats) & static_cast<uint8_t>(f)) != 0;
}

// fio's --eta: when the live status line is shown (status_line.h).
enum class EtaMode : uint8_t { auto_, always, never };

constexpr bool rw_is_random(RwMode m) {
  return m == RwMode::randread || m == RwMode::randwrite || m == RwMode::randrw;
}
constexpr bool rw_has_reads(RwMode m) {
  return m != RwMode::write && m != RwMode::randwrite;
}
constexpr bool rw_has_writes(RwMode m) {
  return m != RwMode::read && m != RwMode::randread;
}
constexpr bool engine_is_sync(IoEngine e) { return e == IoEngine::psync || e == IoEngine::sync; }

const char* rw_name(RwMode m);
const char* engine_name(IoEngine e);

// fio's per-job logs: write_bw_log, write_lat_log, write_iops_log give the
// file prefix of each (empty: not written); see iolog.h for the format.
struct LogOptions {
  std::string bw_prefix;
  std::string lat_prefix;   // three files: _lat, _clat and _slat
  std::string iops_prefix;
  uint64_t avg_msec = 0;    // log_avg_msec: 0 logs every I/O, else the mean over windows of this length
  bool offset = false;      // log_offset: add each I/O's offset as a column
  bool any() const { return !bw_prefix.empty() || !lat_prefix.empty() || !iops_prefix.empty(); }
};

// One job section. numjobs clones of it run, each in its own thread.
struct JobSpec {
  std::string name = "job";
  RwMode rw = RwMode::read;
  unsigned rwmixread = 50;           // percent of reads for rw/randrw
  uint32_t bs = 4096;
  uint64_t size = 0;                 // 0: the device size minus offset
  uint64_t offset = 0;
  uint64_t offset_increment = 0;     // clone N starts at offset + N * this
  unsigned iodepth = 1;
  unsigned iodepth_batch_submit = 1;
  unsigned iodepth_batch_complete = 1;  // fio's iodepth_batch_complete_min; 0 = spin
  unsigned numjobs = 1;
  uint64_t runtime_ns = 0;           // 0: no limit
  bool time_based = false;
  uint64_t ramp_ns = 0;
  IoEngine ioengine = IoEngine::io_uring;
  bool hipri = false;
  // fio's fixedbufs: the job's buffers are registered with its device
  // (Device::register_buffers); no effect where the driver has none.
  bool fixedbufs = false;
  // fio's direct=0: writes are page-cache writeback (kBioWriteback, what
  // wbt throttles); the default, direct=1, submits them as O_DIRECT does.
  bool writeback = false;
  int prio = -1;                     // -1: not given
  int prioclass = -1;
  int cgroup_weight = -1;            // 1..1000, the job thread's IoContext weight (bfq); -1: not given
  // fio's cgroup=NAME: the job's threads join I/O group /NAME (created if
  // missing) and leave it at the end, which then removes it unless
  // cgroup_nodelete. Empty: the root group.
  std::string cgroup;
  bool cgroup_nodelete = false;
  bool gtod_reduce = false;
  bool norandommap = false;
  bool randrepeat = true;
  bool randseed_given = false;
  uint64_t randseed = 0x89;          // fio's default seed
  VerifyMode verify = VerifyMode::none;
  // read_iolog: a blktrace file whose queued I/O the job replays instead of
  // generating its own (bench/replay.h); rw, bs, size and offset then do
  // not apply. Empty: none.
  std::string read_iolog;
  ReplayOptions replay;
  LogOptions log;
  ZbdOptions zbd;                    // zonemode=zbd and its options (bench/zbd.h)
  bool thread = true;                // always threads; option accepted for fio
  bool stonewall = false;            // starts a new group, run after the previous one
  unsigned groupid = 0;              // derived from stonewall when the jobs are built
  // Options as the user gave them, for the JSON "job options" object.
  std::vector<std::pair<std::string, std::string>> given;
};

// Looks up the parameters of a driver (blkmq::device_params in the tool), so
// a `driver=` line in a job file brings that driver's parameters along.
using ParamLookup = std::vector<blkmq::ParamInfo> (*)(std::string_view driver);

// Run-wide settings: device, output, reporting.
struct BenchConfig {
  std::string driver = "null";
  blkmq::ParamMap device_params;     // driver parameters and "attr:PATH"
  std::vector<blkmq::ParamInfo> driver_param_info;  // what the driver accepts
  ParamLookup param_lookup = nullptr;  // nullptr: driver_param_info stays as given
  std::vector<CycleSpec> cycles;     // --cycle, in the order given
  unsigned ndevices = 1;             // identical devices; clone N of a job uses device N % ndevices
  OutputFormat output_format = OutputFormat::normal;  // a set: JSON first, then normal, as fio
  std::string output_file;           // empty: stdout
  EtaMode eta = EtaMode::auto_;      // the status line: auto = when stdout is a terminal
  bool group_reporting = false;
  // --blktrace DIR: each device's blktrace files (<DIR>/<dev>.blktrace.<cpu>,
  // for blkparse, btt, iowatcher) over the jobs' run. Empty: no trace.
  std::string blktrace_dir;
  // --blktrace_buffer_size: each CPU's trace buffer in bytes (0: the
  // library's default, kBlktraceDefaultBuffer).
  uint64_t blktrace_buffer = 0;
  // The first of --blktrace_buffer_size, _act_mask, _start_lba, _end_lba,
  // _pid given (empty: none); the parse refuses them without --blktrace.
  // The filters set their trace/ attributes through device_params
  // ("attr:trace/act_mask", ...), so they hold before the trace starts.
  std::string blktrace_filter_option;
  // --control PATH: the control socket (blkmq attr, blkmq stat) for the
  // run's devices while it runs. Empty: none.
  std::string control_path;
  // --sysfs DIR: the run's devices in a sysfs-like tree (blkmq/sysfs_tree.h)
  // while it runs, for iostat -x -f DIR. Empty: none.
  std::string sysfs_dir;
  // Queue attributes read from every device when the run ends, before the
  // devices go away (RunReport::attrs): --show_attr, and callers such as
  // `blkmq reproduce`. The normal report prints them.
  std::vector<std::string> sample_attrs;
  // fio options accepted but meaningless here (kIgnoredFioOptions), each
  // once, in the order first given; bench_main reports them on stderr.
  std::vector<std::string> ignored_options;
  std::vector<JobSpec> jobs;
};

// What an option configures. A job file may set `device` options only in
// [global]: every device of a run is made with the same options.
enum class OptionScope : uint8_t { job, run, device };

// How an option is named and parsed. `flag` options take an optional value on
// the command line (--time_based or --time_based=0) and may be a bare key in
// a job file.
struct OptionDef {
  const char* name;
  const char* alias;  // nullptr if none
  bool flag;
  std::string help;
  Status (*apply)(BenchConfig& cfg, JobSpec& job, std::string_view value);
  OptionScope scope = OptionScope::job;
};

// The table of bench options (not driver parameters).
const std::vector<OptionDef>& option_defs();
// The bench option named `key` (or aliased), nullptr if none.
const OptionDef* find_option(std::string_view key);
// True for device options and for the driver parameters cfg knows.
bool is_device_option(const BenchConfig& cfg, std::string_view key);

// fio options that mean nothing for an in-process device (page cache,
// registered files, file handling), accepted so that fio command
// lines run unchanged. `filename`, `direct` and `buffered` are on the list
// for drivers without a file: where the driver has a `filename` or `direct`
// parameter they set it (buffered=B as direct=!B).
extern const char* const kIgnoredFioOptions[];

// Applies one option: a bench option from option_defs(), or a driver
// parameter listed in cfg.driver_param_info (stored in cfg.device_params),
// or an ignored fio option (recorded in cfg.ignored_options). Unknown keys
// and bad values give an error naming them; nothing changes then.
Status apply_option(BenchConfig& cfg, JobSpec& job, std::string_view key, std::string_view value);

// Cross-option checks and derived values (sync engines force iodepth 1,
// batch sizes are capped at iodepth, prio without class means best effort).
// Run after all options of a job are applied.
Status finalize_job(JobSpec& job);

// Finds --driver=NAME / --driver NAME in argv, so the driver's parameters
// can be registered before the full parse. Without one: "uring" when argv
// names a --filename (fio opens the file; issue 27: the job ran on null
// with the filename ignored), else "null".
std::string prescan_driver(int argc, const char* const* argv);

// Result of parsing a command line.
struct ParseOutcome {
  int exit_code = 0;      // meaningful when !proceed: 0 for --help, 1 on error
  bool proceed = false;   // true: cfg is valid, run it
  std::string message;    // help text or error message
};

// Parses `blkmq bench [JOBFILE] [options]` (argv[0] is the subcommand name)
// with the given driver parameters registered as --NAME options. A driver
// parameter whose name is also a bench option is reachable as --DRIVER.NAME.
// Options apply in the order given. Without a job file, options before the
// first --name are global and each --name starts a job, as in fio. With a
// job file, options before it are defaults under its [global] and options
// after it override every job; --name cannot be combined with a job file.
// `lookup` (may be nullptr) finds the parameters of a driver a job file picks.
ParseOutcome parse_bench_args(int argc, const char* const* argv,
                              const std::vector<blkmq::ParamInfo>& driver_params,
                              BenchConfig* cfg, ParamLookup lookup = nullptr);

}  // namespace bench

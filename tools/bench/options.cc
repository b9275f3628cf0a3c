#include "bench/options.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>

#include "base/parse.h"
#include "blkmq/iogroup.h"
#include "bench/jobfile.h"
#include "bench/suggest.h"
#include "trace/blktrace_mask.h"

namespace bench {
namespace {

std::string lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

// Every option's error has base/parse.h's shape: "--KEY: 'V' <what is
// wrong>; expected <what is accepted>".
std::string flag_name(std::string_view key) { return "--" + std::string(key); }

Status bad_value(std::string_view key, std::string_view value, std::string_view expected) {
  return blkmq::base::invalid_value(flag_name(key), value, "is not accepted", expected);
}

// An unsigned integer option within [lo, hi].
template <typename T>
Status set_uint(std::string_view key, std::string_view v, uint64_t lo, uint64_t hi, T* field) {
  auto x = blkmq::base::parse_uint(flag_name(key), v, lo, hi);
  if (!x) return x.status();
  *field = static_cast<T>(*x);
  return Status::OK();
}

template <typename T>
Status set_percent(std::string_view key, std::string_view v, unsigned lo, unsigned hi, T* field) {
  auto x = blkmq::base::parse_percent(flag_name(key), v, lo, hi);
  if (!x) return x.status();
  *field = static_cast<T>(*x);
  return Status::OK();
}

Status set_bool(std::string_view key, std::string_view v, bool* field) {
  auto x = blkmq::base::parse_bool(flag_name(key), v);
  if (!x) return x.status();
  *field = *x;
  return Status::OK();
}

// Byte counts are fio's: bytes when bare, k/m/g/... suffixes.
constexpr blkmq::base::SizeRule kJobSizeRule{.lo = 1};
// Offsets address whole sectors.
constexpr blkmq::base::SizeRule kOffsetRule{.multiple = blkmq::kSectorSize};
// A request is whole sectors, and at most what one job buffer holds.
constexpr blkmq::base::SizeRule kBsRule{
    .lo = blkmq::kSectorSize, .hi = 256 * blkmq::base::kMiB, .multiple = blkmq::kSectorSize};
constexpr blkmq::base::SizeRule kReplayAlignRule{.hi = blkmq::base::kTiB};
// Two such buffers per possible CPU are allocated when a trace starts.
constexpr blkmq::base::SizeRule kTraceBufferRule{.lo = 1, .hi = blkmq::base::kGiB};

template <typename T>
Status set_size(std::string_view key, std::string_view v, const blkmq::base::SizeRule& rule, T* field) {
  auto x = blkmq::base::parse_size(flag_name(key), v, rule);
  if (!x) return x.status();
  *field = static_cast<T>(*x);
  return Status::OK();
}

// Zone sizes: whole sectors, at least one.
constexpr blkmq::base::SizeRule kZoneRule{.lo = blkmq::kSectorSize, .multiple = blkmq::kSectorSize};

// A fraction in [0, 1], as fio's float options take it ("0.5", "1").
Status set_fraction(std::string_view key, std::string_view v, double* field) {
  const std::string s(v);
  char* end = nullptr;
  const double x = s.empty() ? -1 : std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !(x >= 0 && x <= 1)) return bad_value(key, v, "a number from 0 to 1");
  *field = x;
  return Status::OK();
}

// "WHAT (default D); <the size syntax>": the help states what the parser
// reads, from the same rule.
std::string size_help(const char* what, const blkmq::base::SizeRule& rule) {
  return std::string(what) + "; " + blkmq::base::describe_size(rule);
}

Status set_time(std::string_view key, std::string_view v, uint64_t* field) {
  auto x = blkmq::base::parse_time_ns(flag_name(key), v);
  if (!x) return x.status();
  *field = *x;
  return Status::OK();
}

Status apply_rw(BenchConfig&, JobSpec& j, std::string_view v) {
  static const std::map<std::string, RwMode, std::less<>> kModes = {
      {"read", RwMode::read},     {"write", RwMode::write}, {"randread", RwMode::randread},
      {"randwrite", RwMode::randwrite}, {"rw", RwMode::rw}, {"readwrite", RwMode::rw},
      {"randrw", RwMode::randrw}};
  auto it = kModes.find(lower(v));
  if (it == kModes.end())
    return bad_value("rw", v, "read, write, randread, randwrite, rw/readwrite or randrw");
  j.rw = it->second;
  return Status::OK();
}

Status apply_rwmixwrite(BenchConfig&, JobSpec& j, std::string_view v) {
  unsigned w = 0;
  Status st = set_percent("rwmixwrite", v, 0, 100, &w);
  if (st) j.rwmixread = 100 - w;
  return st;
}

Status apply_ioengine(BenchConfig&, JobSpec& j, std::string_view v) {
  static const std::map<std::string, IoEngine, std::less<>> kEngines = {
      {"io_uring", IoEngine::io_uring}, {"libaio", IoEngine::libaio},
      {"psync", IoEngine::psync}, {"sync", IoEngine::sync}};
  auto it = kEngines.find(lower(v));
  if (it == kEngines.end()) return bad_value("ioengine", v, "io_uring, libaio, psync or sync");
  j.ioengine = it->second;
  return Status::OK();
}

Status apply_randseed(BenchConfig&, JobSpec& j, std::string_view v) {
  Status st = set_uint("randseed", v, 0, std::numeric_limits<uint64_t>::max(), &j.randseed);
  if (st) j.randseed_given = true;
  return st;
}

Status apply_verify(BenchConfig&, JobSpec& j, std::string_view v) {
  std::string s = lower(v);
  if (s == "crc32c" || s == "crc32c-intel") {
    j.verify = VerifyMode::crc32c;
  } else if (s == "0" || s == "none") {
    j.verify = VerifyMode::none;
  } else {
    return bad_value("verify", v, "crc32c or none");
  }
  return Status::OK();
}

// A comma list as fio takes it ("normal,json"); each name once is enough.
Status apply_output_format(BenchConfig& c, JobSpec&, std::string_view v) {
  std::string s = lower(v);
  uint8_t set = 0;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = std::min(s.find(',', pos), s.size());
    std::string_view name = std::string_view(s).substr(pos, comma - pos);
    if (name == "normal") {
      set |= static_cast<uint8_t>(OutputFormat::normal);
    } else if (name == "json") {
      set |= static_cast<uint8_t>(OutputFormat::json);
    } else if (name == "json+") {
      set |= static_cast<uint8_t>(OutputFormat::json_plus);
    } else {
      return bad_value("output-format", v, "normal, json or json+, or a comma list of them");
    }
    pos = comma + 1;
  }
  c.output_format = static_cast<OutputFormat>(set);
  return Status::OK();
}

Status apply_eta(BenchConfig& c, JobSpec&, std::string_view v) {
  static const std::map<std::string, EtaMode, std::less<>> kModes = {
      {"auto", EtaMode::auto_}, {"always", EtaMode::always}, {"never", EtaMode::never}};
  auto it = kModes.find(lower(v));
  if (it == kModes.end()) return bad_value("eta", v, "auto, always or never");
  c.eta = it->second;
  return Status::OK();
}

// fio names the files PREFIX_bw.N.log; a bare write_bw_log (fio: the job
// name) is refused rather than guessed.
// A string option that must not be empty (`expected` says what it names).
Status set_nonempty(std::string_view key, std::string_view v, const char* expected, std::string* field) {
  if (v.empty()) return bad_value(key, v, expected);
  *field = std::string(v);
  return Status::OK();
}

Status set_log_prefix(std::string_view key, std::string_view v, std::string* field) {
  return set_nonempty(key, v, "a file name prefix", field);
}

Status apply_driver(BenchConfig& c, JobSpec&, std::string_view v) {
  if (v.empty()) return bad_value("driver", v, "a driver name");
  c.driver = std::string(v);
  if (c.param_lookup) c.driver_param_info = c.param_lookup(v);
  return Status::OK();
}

Status apply_cycle(BenchConfig& c, JobSpec&, std::string_view v) {
  blkmq::Result<CycleSpec> r = parse_cycle(v);
  if (!r) return r.status();
  c.cycles.push_back(std::move(*r));
  return Status::OK();
}

Status apply_scheduler(BenchConfig& c, JobSpec&, std::string_view v) {
  if (v.empty()) return bad_value("scheduler", v, "a scheduler name");
  c.device_params["attr:queue/scheduler"] = std::string(v);
  return Status::OK();
}

// --attr PATH=VALUE: a queue attribute set right after the device is created.
Status apply_attr(BenchConfig& c, JobSpec&, std::string_view v) {
  size_t eq = v.find('=');
  if (eq == 0 || eq == std::string_view::npos)
    return bad_value("attr", v, "PATH=VALUE, e.g. queue/nomerges=2");
  c.device_params["attr:" + std::string(v.substr(0, eq))] = std::string(v.substr(eq + 1));
  return Status::OK();
}

// --blktrace_act_mask, _start_lba, _end_lba, _pid: the trace/ attribute
// of the same name, set on each device before its trace starts; checked
// here with the kernel's text forms, so a bad value fails the parse.
Status apply_blktrace_filter(BenchConfig& c, std::string_view key, std::string_view v) {
  const std::string_view attr = key.substr(std::string_view("blktrace_").size());
  uint64_t n = 0;
  if (attr == "act_mask") {
    if (v.empty()) return bad_value(key, v, "expected categories, e.g. issue,complete");
    if (blkmq::Result<uint16_t> m = blkmq::blktrace::act_mask_from_string(v); !m)
      return Status::invalid("--" + std::string(key) + ": " + m.status().message());
  } else if (!blkmq::blktrace::parse_kernel_uint(v, &n) || (attr == "pid" && n > UINT32_MAX)) {
    return bad_value(key, v, attr == "pid" ? "expected a thread id" : "expected a sector number");
  }
  c.device_params["attr:trace/" + std::string(attr)] = std::string(v);
  if (c.blktrace_filter_option.empty()) c.blktrace_filter_option = std::string(key);
  return Status::OK();
}

#define BLKTRACE_FILTER(key) \
  [](BenchConfig& c, JobSpec&, std::string_view v) { return apply_blktrace_filter(c, key, v); }

#define JOB_UINT(field, lo, hi)                                            \
  [](BenchConfig&, JobSpec& j, std::string_view v) {                       \
    return set_uint(#field, v, lo, hi, &j.field);                          \
  }
#define JOB_BOOL(key, field)                                               \
  [](BenchConfig&, JobSpec& j, std::string_view v) { return set_bool(key, v, &j.field); }
#define JOB_TIME(key, field)                                               \
  [](BenchConfig&, JobSpec& j, std::string_view v) { return set_time(key, v, &j.field); }

std::vector<OptionDef> make_defs() {
  return {
      {"name", nullptr, false, "job name",
       [](BenchConfig&, JobSpec& j, std::string_view v) {
         if (v.empty()) return bad_value("name", v, "a job name");
         j.name = std::string(v);
         return Status::OK();
       }},
      {"rw", "readwrite", false, "read, write, randread, randwrite, rw, randrw (default read)", apply_rw},
      {"rwmixread", nullptr, false, "percent of reads in a mixed workload (default 50)",
       [](BenchConfig&, JobSpec& j, std::string_view v) { return set_percent("rwmixread", v, 0, 100, &j.rwmixread); }},
      {"rwmixwrite", nullptr, false, "percent of writes in a mixed workload", apply_rwmixwrite},
      {"bs", "blocksize", false, size_help("block size (default 4k)", kBsRule),
       [](BenchConfig&, JobSpec& j, std::string_view v) { return set_size("bs", v, kBsRule, &j.bs); }},
      {"size", nullptr, false, size_help("bytes per job (default: the device size)", kJobSizeRule),
       [](BenchConfig&, JobSpec& j, std::string_view v) { return set_size("size", v, kJobSizeRule, &j.size); }},
      {"offset", nullptr, false, size_help("start offset (default 0)", kOffsetRule),
       [](BenchConfig&, JobSpec& j, std::string_view v) { return set_size("offset", v, kOffsetRule, &j.offset); }},
      {"offset_increment", nullptr, false,
       size_help("clone N of numjobs starts at offset + N * this (default 0)", kOffsetRule),
       [](BenchConfig&, JobSpec& j, std::string_view v) {
         return set_size("offset_increment", v, kOffsetRule, &j.offset_increment);
       }},
      {"read_iolog", nullptr, false,
       "replay the queued reads and writes of a blktrace FILE (one stream: blkparse -i PREFIX -d FILE)",
       [](BenchConfig&, JobSpec& j, std::string_view v) {
         return set_nonempty("read_iolog", v, "a blktrace file", &j.read_iolog);
       }},
      {"replay_no_stall", nullptr, true, "replay as fast as iodepth allows, not at the recorded pace",
       JOB_BOOL("replay_no_stall", replay.no_stall)},
      {"replay_time_scale", nullptr, false, "percent of the recorded time between I/Os (default 100)",
       [](BenchConfig&, JobSpec& j, std::string_view v) {
         return set_percent("replay_time_scale", v, 1, 1000000, &j.replay.time_scale);
       }},
      {"replay_align", nullptr, false,
       size_help("align replayed offsets down to this power of two (default 0: no alignment)", kReplayAlignRule),
       [](BenchConfig&, JobSpec& j, std::string_view v) -> Status {
         uint64_t align = 0;
         if (Status st = set_size("replay_align", v, kReplayAlignRule, &align); !st) return st;
         if (align & (align - 1))
           return blkmq::base::invalid_value(flag_name("replay_align"), v, "is not a power of two", "0 or a power of two");
         j.replay.align = align;
         return Status::OK();
       }},
      {"replay_scale", nullptr, false, "divide replayed offsets by this (default 1)",
       [](BenchConfig&, JobSpec& j, std::string_view v) {
         return set_uint("replay_scale", v, 1, 1u << 20, &j.replay.scale);
       }},
      {"iodepth", nullptr, false, "I/Os in flight per job (default 1)", JOB_UINT(iodepth, 1, 65536)},
      {"iodepth_batch_submit", "iodepth_batch", false, "bios submitted together (default 1)",
       JOB_UINT(iodepth_batch_submit, 1, 65536)},
      {"iodepth_batch_complete", "iodepth_batch_complete_min", false,
       "completions to wait for when reaping (default 1; 0 spins)", JOB_UINT(iodepth_batch_complete, 0, 65536)},
      {"numjobs", nullptr, false, "threads running this job (default 1)", JOB_UINT(numjobs, 1, 4096)},
      {"runtime", nullptr, false, "run time limit, seconds or with a suffix (5s, 1m)", JOB_TIME("runtime", runtime_ns)},
      {"time_based", nullptr, true, "run for the whole runtime, wrapping around", JOB_BOOL("time_based", time_based)},
      {"ramp_time", nullptr, false, "warm-up time excluded from statistics, seconds or with a suffix (500ms, 1m)",
       JOB_TIME("ramp_time", ramp_ns)},
      {"ioengine", nullptr, false, "io_uring (default), libaio, psync, sync", apply_ioengine},
      {"hipri", nullptr, true, "polled I/O: reap with Queue::poll", JOB_BOOL("hipri", hipri)},
      {"fixedbufs", nullptr, true,
       "register the job's buffers with the device, as fio's io_uring engine does (uring: "
       "io_uring_register_buffers, then READ_FIXED/WRITE_FIXED); ignored, with a warning, by drivers "
       "without registered buffers",
       JOB_BOOL("fixedbufs", fixedbufs)},
      {"prio", nullptr, false, "I/O priority level 0-7", JOB_UINT(prio, 0, 7)},
      {"prioclass", nullptr, false, "I/O priority class: 1 rt, 2 be, 3 idle", JOB_UINT(prioclass, 1, 3)},
      {"cgroup_weight", nullptr, false, "weight, 1-1000 (default 100): with cgroup=, the group's io.bfq.weight and io.weight; else the job threads' I/O context's (bfq)",
       JOB_UINT(cgroup_weight, 1, 1000)},
      {"cgroup", nullptr, false, "I/O group the job threads join (/NAME, created if missing; default: the root)",
       [](BenchConfig&, JobSpec& j, std::string_view v) {
         if (Status st = blkmq::io_group_check_path(v); !st) return Status::invalid("cgroup: " + st.message());
         return set_nonempty("cgroup", v, "an I/O group name", &j.cgroup);
       }},
      {"cgroup_nodelete", nullptr, true, "keep the cgroup= group after the job (default: removed, as fio does)",
       JOB_BOOL("cgroup_nodelete", cgroup_nodelete)},
      {"gtod_reduce", nullptr, true, "no per-I/O clock reads (no latency statistics)",
       JOB_BOOL("gtod_reduce", gtod_reduce)},
      {"norandommap", nullptr, true, "purely random offsets (default: each block once per pass)",
       JOB_BOOL("norandommap", norandommap)},
      {"randrepeat", nullptr, true, "same random sequence every run (default 1)", JOB_BOOL("randrepeat", randrepeat)},
      {"randseed", nullptr, false, "seed of the random generators", apply_randseed},
      {"verify", nullptr, false, "crc32c: write, then read back and check every block", apply_verify},
      {"zonemode", nullptr, false,
       "none (default), or zbd: writes at each zone's write pointer, reads below it (fio's zoned mode)",
       [](BenchConfig&, JobSpec& j, std::string_view v) -> Status {
         if (v == "strided") return bad_value("zonemode", v, "none or zbd (strided is not supported)");
         if (v != "none" && v != "zbd") return bad_value("zonemode", v, "none or zbd");
         j.zbd.enabled = v == "zbd";
         return Status::OK();
       }},
      {"zonesize", nullptr, false, size_help("with zonemode=zbd: the zone size (default the device's)", kZoneRule),
       [](BenchConfig&, JobSpec& j, std::string_view v) { return set_size("zonesize", v, kZoneRule, &j.zbd.zone_size); }},
      {"zonecapacity", nullptr, false,
       size_help("with zonemode=zbd on a device without zones: each emulated zone's writable part", kZoneRule),
       [](BenchConfig&, JobSpec& j, std::string_view v) {
         return set_size("zonecapacity", v, kZoneRule, &j.zbd.zone_capacity);
       }},
      {"zonerange", nullptr, false, size_help("with zonemode=zbd: must equal the zone size", kZoneRule),
       [](BenchConfig&, JobSpec& j, std::string_view v) { return set_size("zonerange", v, kZoneRule, &j.zbd.zone_range); }},
      {"read_beyond_wp", nullptr, true, "zbd: read past the write pointers too (default 0)",
       JOB_BOOL("read_beyond_wp", zbd.read_beyond_wp)},
      {"max_open_zones", nullptr, false, "zbd: zones written at once, all jobs (default: the device's limit)",
       [](BenchConfig&, JobSpec& j, std::string_view v) {
         return set_uint("max_open_zones", v, 0, 1u << 30, &j.zbd.max_open_zones);
       }},
      {"job_max_open_zones", nullptr, false, "zbd: zones written at once by each job (default 0: no limit)",
       [](BenchConfig&, JobSpec& j, std::string_view v) {
         return set_uint("job_max_open_zones", v, 0, 1u << 30, &j.zbd.job_max_open_zones);
       }},
      {"ignore_zone_limits", nullptr, true, "zbd: max_open_zones may exceed the device's limit",
       JOB_BOOL("ignore_zone_limits", zbd.ignore_zone_limits)},
      {"zone_reset_threshold", nullptr, false,
       "zbd: the written share of the region (0..1, default 1) past which zone_reset_frequency applies",
       [](BenchConfig&, JobSpec& j, std::string_view v) {
         return set_fraction("zone_reset_threshold", v, &j.zbd.reset_threshold);
       }},
      {"zone_reset_frequency", nullptr, false,
       "zbd: past the threshold, reset a zone before every (1 / this)th write (0..1, default 0: never)",
       [](BenchConfig&, JobSpec& j, std::string_view v) {
         return set_fraction("zone_reset_frequency", v, &j.zbd.reset_frequency);
       }},
      {"thread", nullptr, true, "accepted for fio compatibility; jobs are always threads", JOB_BOOL("thread", thread)},
      {"stonewall", "wait_for_previous", true, "start a new group, run after the previous group finished",
       JOB_BOOL("stonewall", stonewall)},
      {"group_reporting", nullptr, true, "report each group of jobs as one",
       [](BenchConfig& c, JobSpec&, std::string_view v) { return set_bool("group_reporting", v, &c.group_reporting); },
       OptionScope::run},
      {"output-format", nullptr, false,
       "normal (default), json, or json+ (json with the clat histogram bins); a comma list prints each, JSON first",
       apply_output_format, OptionScope::run},
      {"blktrace", nullptr, false,
       "record each device's blktrace events into DIR/<dev>.blktrace.<cpu> (blkparse -i DIR/<dev>)",
       [](BenchConfig& c, JobSpec&, std::string_view v) {
         return set_nonempty("blktrace", v, "a directory", &c.blktrace_dir);
       },
       OptionScope::run},
      {"blktrace_buffer_size", nullptr, false,
       size_help("with --blktrace: each CPU's trace buffer (default 2m, blktrace's 4 x 512k); a full one drops "
                 "events",
                 kTraceBufferRule),
       [](BenchConfig& c, JobSpec&, std::string_view v) {
         if (Status st = set_size("blktrace_buffer_size", v, kTraceBufferRule, &c.blktrace_buffer); !st) return st;
         if (c.blktrace_filter_option.empty()) c.blktrace_filter_option = "blktrace_buffer_size";
         return Status::OK();
       },
       OptionScope::run},
      {"blktrace_act_mask", nullptr, false,
       "with --blktrace: record only events of these categories (trace/act_mask, blktrace -a), names "
       "separated by commas from read,write,flush,sync,queue,requeue,issue,complete,fs,pc,notify,ahead,meta,"
       "discard,drv_data,fua, or a number such as 0xc0 (default: all)",
       BLKTRACE_FILTER("blktrace_act_mask"), OptionScope::device},
      {"blktrace_start_lba", nullptr, false,
       "with --blktrace: record no event below this sector (trace/start_lba; default 0)",
       BLKTRACE_FILTER("blktrace_start_lba"), OptionScope::device},
      {"blktrace_end_lba", nullptr, false,
       "with --blktrace: record no event above this sector (trace/end_lba; default: the device's size in "
       "sectors); events without a sector (P, U, S) pass both bounds",
       BLKTRACE_FILTER("blktrace_end_lba"), OptionScope::device},
      {"blktrace_pid", nullptr, false,
       "with --blktrace: record only the events caused by this thread id (trace/pid; default 0: every thread)",
       BLKTRACE_FILTER("blktrace_pid"), OptionScope::device},
      {"control", nullptr, false,
       "listen on the Unix socket PATH (owner-only) for blkmq attr / blkmq stat during the run",
       [](BenchConfig& c, JobSpec&, std::string_view v) {
         return set_nonempty("control", v, "a socket path", &c.control_path);
       },
       OptionScope::run},
      {"show_attr", nullptr, false,
       "print queue attribute PATH of each device when the run ends (e.g. queue/iosched/lock_stat), repeatable",
       [](BenchConfig& c, JobSpec&, std::string_view v) {
         if (v.empty()) return bad_value("show_attr", v, "an attribute path, e.g. mq/0/dispatch_lock_stat");
         c.sample_attrs.emplace_back(v);
         return Status::OK();
       },
       OptionScope::run},
      {"sysfs", nullptr, false, "keep DIR/block/<dev>/{stat,queue/*,...} live during the run (iostat -x -f DIR 1)",
       [](BenchConfig& c, JobSpec&, std::string_view v) {
         return set_nonempty("sysfs", v, "a directory", &c.sysfs_dir);
       },
       OptionScope::run},
      {"output", nullptr, false, "write the report to FILE",
       [](BenchConfig& c, JobSpec&, std::string_view v) {
         c.output_file = std::string(v);
         return Status::OK();
       },
       OptionScope::run},
      // fio's logs (iolog.h) and live status line (status_line.h).
      {"write_bw_log", nullptr, false, "write PREFIX_bw.N.log: bandwidth per I/O, or per log_avg_msec window",
       [](BenchConfig&, JobSpec& j, std::string_view v) { return set_log_prefix("write_bw_log", v, &j.log.bw_prefix); }},
      {"write_lat_log", nullptr, false, "write PREFIX_lat.N.log, PREFIX_clat.N.log, PREFIX_slat.N.log (ns)",
       [](BenchConfig&, JobSpec& j, std::string_view v) {
         return set_log_prefix("write_lat_log", v, &j.log.lat_prefix);
       }},
      {"write_iops_log", nullptr, false, "write PREFIX_iops.N.log: IOPS per I/O (1), or per log_avg_msec window",
       [](BenchConfig&, JobSpec& j, std::string_view v) {
         return set_log_prefix("write_iops_log", v, &j.log.iops_prefix);
       }},
      {"log_avg_msec", nullptr, false, "log the average of each window of this many ms (default 0: every I/O)",
       [](BenchConfig&, JobSpec& j, std::string_view v) {
         return set_uint("log_avg_msec", v, 0, 86400000, &j.log.avg_msec);
       }},
      {"log_offset", nullptr, true, "add each I/O's offset to the log lines (default 0)",
       JOB_BOOL("log_offset", log.offset)},
      {"eta", nullptr, false, "live status line on stdout: auto (default: when stdout is a terminal), always, never",
       apply_eta, OptionScope::run},
      {"driver", nullptr, false, "device driver (default null)", apply_driver, OptionScope::device},
      {"scheduler", nullptr, false, "I/O scheduler (queue/scheduler)", apply_scheduler, OptionScope::device},
      {"ndevices", nullptr, false,
       "identical devices to create (default 1); clone N of each job uses device N % ndevices",
       [](BenchConfig& c, JobSpec&, std::string_view v) { return set_uint("ndevices", v, 1, 64, &c.ndevices); },
       OptionScope::device},
      {"attr", nullptr, false, "queue attribute PATH=VALUE, repeatable", apply_attr, OptionScope::device},
      {"cycle", nullptr, false,
       "PATH=V1,V2,...@MS: set queue attribute PATH to the next value every MS ms during the run, repeatable",
       apply_cycle, OptionScope::device},
  };
}

bool is_bench_option(std::string_view key) { return find_option(key) != nullptr; }

}  // namespace

const char* rw_name(RwMode m) {
  static const char* const kNames[] = {"read", "write", "randread", "randwrite", "rw", "randrw"};
  return kNames[static_cast<int>(m)];
}

const char* engine_name(IoEngine e) {
  static const char* const kNames[] = {"io_uring", "libaio", "psync", "sync"};
  return kNames[static_cast<int>(e)];
}

const std::vector<OptionDef>& option_defs() {
  static const std::vector<OptionDef> kDefs = make_defs();
  return kDefs;
}

const OptionDef* find_option(std::string_view key) {
  for (const OptionDef& d : option_defs())
    if (key == d.name || (d.alias && key == d.alias)) return &d;
  return nullptr;
}

namespace {

// A driver parameter by its own name or as DRIVER.NAME.
const blkmq::ParamInfo* find_driver_param(const BenchConfig& cfg, std::string_view key) {
  std::string prefix = cfg.driver + ".";
  if (key.substr(0, prefix.size()) == prefix) key.remove_prefix(prefix.size());
  for (const blkmq::ParamInfo& p : cfg.driver_param_info)
    if (key == p.name) return &p;
  return nullptr;
}

}  // namespace

bool is_device_option(const BenchConfig& cfg, std::string_view key) {
  if (const OptionDef* d = find_option(key)) return d->scope == OptionScope::device;
  return find_driver_param(cfg, key) != nullptr;
}

const char* const kIgnoredFioOptions[] = {"invalidate", "registerfiles", "nonvectored", "buffered",
                                          "direct", "filename", "allow_mounted_write", "create_on_open", nullptr};

namespace {

bool is_ignored_fio_option(std::string_view key) {
  for (const char* const* k = kIgnoredFioOptions; *k; ++k)
    if (key == *k) return true;
  return false;
}

// fio's buffered=B is direct=!B, for a driver that has `direct`.
bool forward_buffered(BenchConfig& cfg, std::string_view key, std::string_view value, Status* st) {
  if (key != "buffered" || find_driver_param(cfg, "direct") == nullptr) return false;
  bool b = false;
  *st = set_bool("buffered", value, &b);
  if (*st) cfg.device_params["direct"] = b ? "0" : "1";
  return true;
}

}  // namespace

Status apply_option(BenchConfig& cfg, JobSpec& job, std::string_view key, std::string_view value) {
  // fio's direct=0 (buffered I/O): the job's writes are marked as the
  // page cache's writeback (kBioWriteback), which wbt may throttle. Then
  // as before: a driver with a `direct` parameter gets it too.
  if (key == "direct") {
    bool direct = true;
    if (Status st = set_bool("direct", value, &direct); !st) return st;
    job.writeback = !direct;
  }
  if (const OptionDef* d = find_option(key)) {
    Status st = d->apply(cfg, job, value);
    if (st) job.given.emplace_back(d->name, std::string(value));
    return st;
  }
  if (const blkmq::ParamInfo* p = find_driver_param(cfg, key)) {
    cfg.device_params[p->name] = std::string(value);
    job.given.emplace_back(std::string(key), std::string(value));
    return Status::OK();
  }
  if (Status st; forward_buffered(cfg, key, value, &st)) {
    if (st) job.given.emplace_back(std::string(key), std::string(value));
    return st;
  }
  if (is_ignored_fio_option(key)) {
    std::vector<std::string>& ig = cfg.ignored_options;
    if (key != "direct" && std::find(ig.begin(), ig.end(), key) == ig.end()) ig.emplace_back(key);
    job.given.emplace_back(std::string(key), std::string(value));
    return Status::OK();
  }
  return Status::invalid("unknown option --" + std::string(key) + " (see blkmq bench --help)");
}

Status finalize_job(JobSpec& j) {
  if (engine_is_sync(j.ioengine)) {
    // One I/O at a time, as fio's psync/sync engines do.
    j.iodepth = 1;
  }
  j.iodepth_batch_submit = std::min(j.iodepth_batch_submit, j.iodepth);
  j.iodepth_batch_complete = std::min(j.iodepth_batch_complete, j.iodepth);
  if (j.prio >= 0 && j.prioclass < 0) j.prioclass = 2;  // a level alone means best effort
  if (j.prioclass >= 0 && j.prio < 0) j.prio = 4;       // the kernel's default level
  if (j.size != 0 && j.size < j.bs)
    return Status::invalid("--size=" + std::to_string(j.size) + " is smaller than --bs=" + std::to_string(j.bs));
  if (j.time_based && j.runtime_ns == 0)
    return Status::invalid("--time_based needs --runtime");
  if (j.verify != VerifyMode::none && j.bs < 64)
    return Status::invalid("--verify needs --bs of at least 64 bytes");
  return Status::OK();
}

std::string prescan_driver(int argc, const char* const* argv) {
  std::string driver;
  bool filename = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a.substr(0, 9) == "--driver=") {
      driver = std::string(a.substr(9));
    } else if (a == "--driver" && i + 1 < argc) {
      driver = argv[++i];
    } else if (a.substr(0, 11) == "--filename=" || a == "--filename") {
      filename = true;
    }
  }
  if (!driver.empty()) return driver;
  return filename ? "uring" : "null";
}

namespace {

// Help without CLI11's "{1}" after a flag's name (its value when given
// bare: an implementation detail, read as part of the name).
class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_option_name(const CLI::Option* opt, bool positional) const override {
    std::string n = CLI::Formatter::make_option_name(opt, positional);
    for (size_t b; (b = n.find('{')) != std::string::npos;) {
      const size_t e = n.find('}', b);
      if (e == std::string::npos) break;
      n.erase(b, e - b + 1);
    }
    return n;
  }
};

// CLI11 checks the syntax and writes --help; the values are then read back in
// the order given (parse_order), because with --name and a job file the order
// decides which job an option belongs to.
struct CliKeys {
  std::map<const CLI::Option*, std::string> key;  // the apply_option key
  const CLI::Option* jobfile = nullptr;
  std::vector<std::unique_ptr<std::string>> sinks;  // CLI11 stores values somewhere
};

std::string* new_sink(CliKeys& k) { return k.sinks.emplace_back(std::make_unique<std::string>()).get(); }

void register_options(CLI::App& app, CliKeys& k, const std::string& driver,
                      const std::vector<blkmq::ParamInfo>& params) {
  k.jobfile = app.add_option("jobfile", *new_sink(k),
                             "fio job file: [global] and job sections with the options below as key=value");
  for (const OptionDef& d : option_defs()) {
    std::string names = std::string("--") + d.name + (d.alias ? std::string(",--") + d.alias : "");
    CLI::Option* o = d.flag ? app.add_flag(names + "{1}", *new_sink(k), d.help)
                            : app.add_option(names, *new_sink(k), d.help)->type_name("VALUE");
    o->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    k.key[o] = d.name;
  }
  for (const blkmq::ParamInfo& p : params) {
    std::string key = is_bench_option(p.name) ? driver + "." + p.name : p.name;
    // The default once: some parameters' help states it already (null's
    // size, in GiB), and an empty one says nothing.
    const bool says = p.help.find("(default") != std::string::npos || p.default_value.empty();
    CLI::Option* o =
        app.add_option("--" + key, *new_sink(k), driver + ": " + p.help + (says ? "" : " (default " + p.default_value + ")"))
            ->type_name("VALUE")
            ->group("Driver " + driver)
            ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    k.key[o] = key;
  }
  for (const char* const* name = kIgnoredFioOptions; *name; ++name) {
    if (app.get_option_no_throw(std::string("--") + *name) != nullptr) continue;  // a driver parameter
    const bool direct = std::string_view(*name) == "direct";
    CLI::Option* o = app.add_flag(std::string("--") + *name + "{1}", *new_sink(k),
                                  direct ? "0: writes are page-cache writeback, which wbt may throttle (default 1)"
                                         : "fio option accepted and ignored (no meaning for this driver)")
                         ->group("fio compatibility (ignored)")
                         ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    k.key[o] = *name;
  }
}

// Sorts the parsed options into defaults, --name jobs and job-file overrides.
Status collect_args(const CLI::App& app, const CliKeys& k, JobSource* src) {
  std::map<const CLI::Option*, size_t> next;
  std::vector<OptionArg>* dest = &src->defaults;
  for (const CLI::Option* o : app.parse_order()) {
    const std::string& v = o->results().at(next[o]++);
    if (o == k.jobfile) {
      if (!src->cli_jobs.empty()) return Status::invalid("--name cannot be combined with a job file");
      src->file_name = v;
      dest = &src->overrides;
      continue;
    }
    const std::string& key = k.key.at(o);
    if (key == "name") {
      if (!src->file_name.empty()) return Status::invalid("--name cannot be combined with a job file");
      dest = &src->cli_jobs.emplace_back();
    }
    dest->push_back({key, v});
  }
  return Status::OK();
}

}  // namespace

ParseOutcome parse_bench_args(int argc, const char* const* argv,
                              const std::vector<blkmq::ParamInfo>& driver_params, BenchConfig* cfg,
                              ParamLookup lookup) {
  ParseOutcome out;
  BenchConfig c;
  c.driver = prescan_driver(argc, argv);
  c.driver_param_info = driver_params;
  c.param_lookup = lookup;
  CLI::App app("Load generator for blkmq devices, with fio's option names and job files.",
               "blkmq bench");
  app.footer("Without a job file, options before the first --name apply to every job and each --name starts a\n"
             "job. With a job file, options before it are defaults under its [global], options after it\n"
             "override every job. stonewall starts a new group, run after the previous one.\n"
             "--compare PATH=A,B [--repeat N] runs the whole job with queue attribute PATH at A and at B,\n"
             "interleaved N times (default 3), and prints both side by side with medians and the ratio.\n"
             "--driver=NAME --help lists NAME's own parameters (null's by default).");
  app.formatter(std::make_shared<HelpFormatter>());
  app.get_formatter()->column_width(40);
  CliKeys keys;
  register_options(app, keys, c.driver, driver_params);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    out.message = app.help();
    return out;
  } catch (const CLI::ParseError& e) {
    out.exit_code = 1;
    out.message = "blkmq bench: " + parse_error_message(app, e);
    return out;
  }
  JobSource src;
  Status st = collect_args(app, keys, &src);
  if (st && !src.file_name.empty()) {
    blkmq::Result<std::vector<IniSection>> f = read_job_file(src.file_name);
    if (f) src.file = std::move(*f);
    else st = f.status();
  }
  if (st) st = build_jobs(src, c);
  if (st && !c.blktrace_filter_option.empty() && c.blktrace_dir.empty())
    st = Status::invalid("--" + c.blktrace_filter_option + " shapes a trace: it needs --blktrace=DIR");
  if (!st) {
    out.exit_code = 1;
    out.message = "blkmq bench: " + st.message();
    return out;
  }
  *cfg = std::move(c);
  out.proceed = true;
  return out;
}

}  // namespace bench

// fio job files: the INI reader and the step that turns command-line
// options and job-file sections into the list of jobs, with their groups.
//
// A job file has [global] sections and job sections; each line is
// `key=value`, or a bare `key` for a flag option; `;` and `#` start comments.
// [global] options apply to the job sections after it. A job section is one
// job (numjobs clones it). Job sections run concurrently within a group;
// `stonewall` (or `wait_for_previous`) starts a new group that runs after the
// previous one finished. Device options (driver, its parameters, scheduler,
// attr, cycle) belong in [global] or on the command line: one device per run.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "blkmq/status.h"
#include "bench/options.h"

namespace bench {

struct IniEntry {
  std::string key;
  std::string value;
  bool bare = false;  // `key` without `=`
  unsigned line = 0;
};

struct IniSection {
  std::string name;   // "global" for [global]
  unsigned line = 0;  // of the header
  std::vector<IniEntry> entries;
};

// Parses job-file text. Errors name `file_name` and the line:
// "job.fio:7: option outside a section".
blkmq::Result<std::vector<IniSection>> parse_job_ini(std::string_view text, std::string_view file_name);
// Reads and parses a job file.
blkmq::Result<std::vector<IniSection>> read_job_file(const std::string& path);

// One command-line option, in the order given.
struct OptionArg {
  std::string key;
  std::string value;
};

// Where the options of a run come from (see parse_bench_args for the rules).
struct JobSource {
  std::vector<OptionArg> defaults;               // command line, before any job
  std::vector<std::vector<OptionArg>> cli_jobs;  // one per --name, starting with it
  std::string file_name;                         // empty: no job file
  std::vector<IniSection> file;                  // its sections, in order
  std::vector<OptionArg> overrides;              // command line, after the job file
};

// Builds cfg.jobs (each finalized, groupids assigned) and the run-wide
// settings of cfg. A job file without job sections is an error.
Status build_jobs(const JobSource& src, BenchConfig& cfg);

}  // namespace bench

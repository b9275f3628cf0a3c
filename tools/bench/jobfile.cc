#include "bench/jobfile.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/parse.h"

namespace bench {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// A comment starts the line or follows white space, so values such as
// attr=queue/x=a#b keep their '#'.
std::string_view strip_comment(std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i)
    if ((s[i] == ';' || s[i] == '#') && (i == 0 || s[i - 1] == ' ' || s[i - 1] == '\t')) return s.substr(0, i);
  return s;
}

std::string at(std::string_view file, unsigned line) {
  return std::string(file) + ":" + std::to_string(line) + ": ";
}

// One non-empty, comment-free line: a header or an option.
Status parse_line(std::string_view s, unsigned line, std::string_view file, std::vector<IniSection>& out) {
  if (s.front() == '[') {
    if (s.back() != ']') return Status::invalid(at(file, line) + "section header without a closing ']'");
    std::string_view name = trim(s.substr(1, s.size() - 2));
    if (name.empty()) return Status::invalid(at(file, line) + "empty section name");
    out.push_back({std::string(name), line, {}});
    return Status::OK();
  }
  size_t eq = s.find('=');
  std::string_view key = trim(s.substr(0, eq));
  if (key.empty()) return Status::invalid(at(file, line) + "'" + std::string(s) + "' has no option name");
  if (key.find_first_of(" \t[]") != std::string_view::npos)
    return Status::invalid(at(file, line) + "'" + std::string(s) + "' is not an option (expected key=value or key)");
  if (out.empty())
    return Status::invalid(at(file, line) + "option '" + std::string(key) +
                           "' outside a section (put it under [global] or a [job])");
  IniEntry e{std::string(key), "", eq == std::string_view::npos, line};
  if (!e.bare) e.value = std::string(trim(s.substr(eq + 1)));
  out.back().entries.push_back(std::move(e));
  return Status::OK();
}

Status apply_args(BenchConfig& cfg, JobSpec& job, const std::vector<OptionArg>& args) {
  for (const OptionArg& a : args)
    if (Status st = apply_option(cfg, job, a.key, a.value); !st) return st;
  return Status::OK();
}

Status apply_entry(BenchConfig& cfg, JobSpec& job, const IniEntry& e, bool global, std::string_view file) {
  const OptionDef* d = find_option(e.key);
  if (e.bare && (d ? !d->flag : is_device_option(cfg, e.key)))
    return Status::invalid(at(file, e.line) + "option '" + e.key + "' needs a value (" + e.key + "=VALUE)");
  const std::string_view value = e.bare ? std::string_view("1") : std::string_view(e.value);  // bare flag: on
  // fio's direct= is a job's; here one device serves the run, opened once,
  // so in a job section it says only how that job's writes are marked
  // (page-cache writeback, which wbt throttles, or O_DIRECT-like). The
  // driver's own `direct` comes from [global] or the command line.
  if (!global && e.key == "direct") {
    auto direct = blkmq::base::parse_bool("direct", value);
    if (!direct) return Status::invalid(at(file, e.line) + direct.status().message());
    job.writeback = !*direct;
    job.given.emplace_back(e.key, std::string(value));
    return Status::OK();
  }
  if (!global && is_device_option(cfg, e.key))
    return Status::invalid(at(file, e.line) + "'" + e.key +
                           "' is a device option: set it in [global] or on the command line (one device per run)");
  Status st = apply_option(cfg, job, e.key, value);
  return st ? st : Status::invalid(at(file, e.line) + st.message());
}

Status add_job(BenchConfig& cfg, JobSpec job, const std::string& where) {
  Status st = finalize_job(job);
  if (!st) return Status::invalid(where + st.message());
  cfg.jobs.push_back(std::move(job));
  return Status::OK();
}

// Job-scope overrides apply to every job; the others once, to the run.
void split_overrides(const std::vector<OptionArg>& all, std::vector<OptionArg>* job, std::vector<OptionArg>* run) {
  for (const OptionArg& a : all) {
    const OptionDef* d = find_option(a.key);
    (d && d->scope == OptionScope::job ? job : run)->push_back(a);
  }
}

Status build_file_jobs(const JobSource& src, BenchConfig& cfg, JobSpec tmpl) {
  const std::string& file = src.file_name;
  // The driver first: it decides which driver parameters [global] may name.
  for (const IniSection& s : src.file)
    for (const IniEntry& e : s.entries)
      if (s.name == "global" && e.key == "driver")
        if (Status st = apply_entry(cfg, tmpl, e, true, file); !st) return st;
  std::vector<OptionArg> job_over, run_over;
  split_overrides(src.overrides, &job_over, &run_over);
  for (const IniSection& s : src.file) {
    const bool global = s.name == "global";
    JobSpec job = tmpl;
    JobSpec& target = global ? tmpl : job;
    if (!global) (void)apply_option(cfg, job, "name", s.name);  // a header's name is never empty
    for (const IniEntry& e : s.entries)
      if (Status st = apply_entry(cfg, target, e, global, file); !st) return st;
    if (global) continue;
    const std::string where = at(file, s.line) + "job '" + job.name + "': ";
    if (Status st = apply_args(cfg, job, job_over); !st) return Status::invalid("command line: " + st.message());
    if (Status st = add_job(cfg, std::move(job), where); !st) return st;
  }
  if (cfg.jobs.empty()) return Status::invalid(file + ": no job sections (only [global])");
  JobSpec scratch;
  if (Status st = apply_args(cfg, scratch, run_over); !st) return Status::invalid("command line: " + st.message());
  return Status::OK();
}

}  // namespace

blkmq::Result<std::vector<IniSection>> parse_job_ini(std::string_view text, std::string_view file_name) {
  std::vector<IniSection> out;
  unsigned line = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t nl = text.find('\n', pos);
    std::string_view raw = text.substr(pos, nl == std::string_view::npos ? text.npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    ++line;
    std::string_view s = trim(strip_comment(raw));
    if (s.empty()) continue;
    if (Status st = parse_line(s, line, file_name, out); !st) return st;
  }
  return out;
}

blkmq::Result<std::vector<IniSection>> read_job_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) return Status::error(errno ? errno : 2, "cannot open job file '" + path + "': " + std::strerror(errno));
  std::ostringstream text;
  text << f.rdbuf();
  if (f.bad()) return Status::error(EIO, "cannot read job file '" + path + "'");
  return parse_job_ini(text.str(), path);
}

Status build_jobs(const JobSource& src, BenchConfig& cfg) {
  JobSpec tmpl;
  cfg.jobs.clear();
  Status st = apply_args(cfg, tmpl, src.defaults);
  if (st && !src.file_name.empty()) {
    st = build_file_jobs(src, cfg, tmpl);
  } else if (st && !src.cli_jobs.empty()) {
    for (const std::vector<OptionArg>& args : src.cli_jobs) {
      JobSpec job = tmpl;
      st = apply_args(cfg, job, args);
      if (st) st = add_job(cfg, std::move(job), src.cli_jobs.size() > 1 ? "job '" + args.front().value + "': " : "");
      if (!st) break;
    }
  } else if (st) {
    st = add_job(cfg, std::move(tmpl), "");
  }
  if (!st) return st;
  // fio's rule: a stonewall job waits for every job before it.
  unsigned group = 0;
  for (size_t i = 0; i < cfg.jobs.size(); ++i) {
    if (i > 0 && cfg.jobs[i].stonewall) ++group;
    cfg.jobs[i].groupid = group;
  }
  return Status::OK();
}

}  // namespace bench

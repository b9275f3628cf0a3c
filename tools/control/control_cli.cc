// `blkmq attr` and `blkmq stat`: the control socket's command-line clients.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/parse.h"
#include "control/control.h"

namespace control {
namespace {

using nlohmann::json;

constexpr const char* kAttrUsage =
    "usage: blkmq attr --control PATH [DEV [ATTR[=VALUE]]]\n"
    "Reads and writes the queue attributes of a running blkmq process (blkmq bench or blkmq nbd started\n"
    "with --control PATH). No DEV: its devices. DEV: every attribute with its value. DEV ATTR: the value.\n"
    "DEV ATTR=VALUE: writes it, with the checks and messages of --attr (e.g. queue/scheduler=bfq).\n";
constexpr const char* kStatUsage =
    "usage: blkmq stat --control PATH [INTERVAL [COUNT]]\n"
    "Every INTERVAL (seconds when bare, or 500ms; default 1), COUNT times (default until stopped), one line\n"
    "per device of a running blkmq process, as iostat -x prints them: r/s w/s rkB/s wkB/s r_await w_await\n"
    "aqu-sz %util. Under a device, a line per I/O group that has done I/O on it (its cgroup/PATH/io.stat,\n"
    "which counts a group with its descendants, as cgroup v2's): r/s w/s rkB/s wkB/s at submission.\n";

int fail(const char* tool, const std::string& msg) {
  std::fprintf(stderr, "blkmq %s: %s\n", tool, msg.c_str());
  return 1;
}

// Parses "--control PATH" / "--control=PATH" and the positional words.
bool parse(int argc, char** argv, const char* usage, std::string* path, std::vector<std::string>* words) {
  for (int i = 1; i < argc; i++) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(usage, stdout);
      std::exit(0);
    }
    if (a == "--control" && i + 1 < argc) *path = argv[++i];
    else if (a.rfind("--control=", 0) == 0) *path = a.substr(10);
    else if (a.rfind("--", 0) == 0) return false;
    else words->push_back(a);
  }
  return !path->empty();
}


std::string one_line(std::string v) {
  while (!v.empty() && v.back() == '\n') v.pop_back();
  for (char& ch : v)
    if (ch == '\n') ch = ' ';
  return v;
}

int attr_list(Client& c, const std::string& dev) {
  json a = c.request({{"op", "attrs"}, {"dev", dev}});
  if (!a["ok"].get<bool>()) return fail("attr", a["error"].get<std::string>());
  for (const auto& name : a["attrs"]) {
    json v = c.request({{"op", "get"}, {"dev", dev}, {"attr", name}});
    if (v["ok"].get<bool>())
      std::printf("%s: %s\n", name.get<std::string>().c_str(), one_line(v["value"].get<std::string>()).c_str());
  }
  return 0;
}

// The arguments (at most two words, and --control's path in *path) and a
// connection to the socket; nullptr after printing why not.
std::unique_ptr<Client> connect_from_args(int argc, char** argv, const char* tool, const char* usage,
                                          std::vector<std::string>* words, std::string* path) {
  if (!parse(argc, argv, usage, path, words) || words->size() > 2) {
    std::fputs(usage, stderr);
    return nullptr;
  }
  auto c = Client::connect(*path);
  if (!c) {
    fail(tool, c.status().message());
    return nullptr;
  }
  return std::move(*c);
}

}  // namespace

int attr_main(int argc, char** argv) {
  std::vector<std::string> w;
  std::string path;
  std::unique_ptr<Client> c = connect_from_args(argc, argv, "attr", kAttrUsage, &w, &path);
  if (!c) return 1;
  if (w.empty()) {
    json a = c->request({{"op", "list"}});
    if (!a["ok"].get<bool>()) return fail("attr", a["error"].get<std::string>());
    for (const auto& d : a["devices"]) std::printf("%s\n", d.get<std::string>().c_str());
    return 0;
  }
  if (w.size() == 1) return attr_list(*c, w[0]);
  const size_t eq = w[1].find('=');
  json req = eq == std::string::npos
                 ? json{{"op", "get"}, {"dev", w[0]}, {"attr", w[1]}}
                 : json{{"op", "set"}, {"dev", w[0]}, {"attr", w[1].substr(0, eq)}, {"value", w[1].substr(eq + 1)}};
  json a = c->request(req);
  if (!a["ok"].get<bool>()) return fail("attr", a["error"].get<std::string>());
  if (eq == std::string::npos) std::printf("%s\n", one_line(a["value"].get<std::string>()).c_str());
  // A write that stopped a lossy trace: the process's warning (its drops).
  if (a.contains("warning") && a["warning"].is_string())
    std::fprintf(stderr, "blkmq attr: warning: %s\n", a["warning"].get<std::string>().c_str());
  return 0;
}

namespace {

// The counters of /sys/block/<dev>/stat that iostat -x reads.
struct StatSample {
  double rd_ios, rd_sec, rd_ticks, wr_ios, wr_sec, wr_ticks, io_ticks, time_in_queue;
};

bool sample(Client& c, const std::string& dev, StatSample* s) {
  json a = c.request({{"op", "get"}, {"dev", dev}, {"attr", "stat"}});
  if (!a["ok"].get<bool>()) return false;
  std::istringstream in(a["value"].get<std::string>());
  double f[11] = {};
  for (double& x : f)
    if (!(in >> x)) return false;
  *s = {f[0], f[2], f[3], f[4], f[6], f[7], f[9], f[10]};
  return true;
}

void print_line(const std::string& dev, const StatSample& a, const StatSample& b, double dt_s) {
  const double r = b.rd_ios - a.rd_ios, w = b.wr_ios - a.wr_ios;
  const double ms = dt_s * 1000;
  std::printf("%-12s %10.2f %10.2f %10.2f %10.2f %8.2f %8.2f %7.2f %6.2f\n", dev.c_str(), r / dt_s, w / dt_s,
              (b.rd_sec - a.rd_sec) / 2 / dt_s, (b.wr_sec - a.wr_sec) / 2 / dt_s,
              r ? (b.rd_ticks - a.rd_ticks) / r : 0.0, w ? (b.wr_ticks - a.wr_ticks) / w : 0.0,
              (b.time_in_queue - a.time_in_queue) / ms, std::min(100.0, (b.io_ticks - a.io_ticks) / ms * 100));
}

// One group's io.stat counters on one device (cgroup v2's keys).
struct GroupSample {
  double rbytes = 0, wbytes = 0, rios = 0, wios = 0;
};

// The groups of `dev` that have done I/O on it, by path, from their
// cgroup/<path>/io.stat attributes; the root's (the device's own stat,
// printed on the device's line) is left out.
std::map<std::string, GroupSample> group_samples(Client& c, const std::string& dev) {
  std::map<std::string, GroupSample> out;
  json names = c.request({{"op", "attrs"}, {"dev", dev}});
  if (!names["ok"].get<bool>()) return out;
  constexpr std::string_view kPre = "cgroup/", kSuf = "/io.stat";
  for (const auto& n : names["attrs"]) {
    const std::string a = n.get<std::string>();
    if (a.size() <= kPre.size() + kSuf.size() || a.rfind(kPre, 0) != 0 || !a.ends_with(kSuf)) continue;
    json v = c.request({{"op", "get"}, {"dev", dev}, {"attr", a}});
    if (!v["ok"].get<bool>()) continue;  // removed meanwhile
    std::istringstream in(v["value"].get<std::string>());
    GroupSample g;
    std::string kv;
    in >> kv;  // MAJ:MIN
    while (in >> kv) {
      const size_t eq = kv.find('=');
      if (eq == std::string::npos) continue;
      const std::string k = kv.substr(0, eq);
      const double x = std::strtod(kv.c_str() + eq + 1, nullptr);
      if (k == "rbytes") g.rbytes = x;
      else if (k == "wbytes") g.wbytes = x;
      else if (k == "rios") g.rios = x;
      else if (k == "wios") g.wios = x;
    }
    if (g.rios + g.wios > 0) out["/" + a.substr(kPre.size(), a.size() - kPre.size() - kSuf.size())] = g;
  }
  return out;
}

// The groups' lines under their device's; a group not seen before counts
// from zero (it was made, or did its first I/O, since the last report).
void print_groups(const std::map<std::string, GroupSample>& was, const std::map<std::string, GroupSample>& now,
                  double dt_s) {
  for (const auto& [path, b] : now) {
    auto it = was.find(path);
    const GroupSample a = it == was.end() ? GroupSample{} : it->second;
    std::printf("  %-10s %10.2f %10.2f %10.2f %10.2f %8s %8s %7s %6s\n", path.c_str(), (b.rios - a.rios) / dt_s,
                (b.wios - a.wios) / dt_s, (b.rbytes - a.rbytes) / 1024 / dt_s, (b.wbytes - a.wbytes) / 1024 / dt_s,
                "-", "-", "-", "-");
  }
}

}  // namespace

int stat_main(int argc, char** argv) {
  std::vector<std::string> w;
  std::string path;
  std::unique_ptr<Client> c = connect_from_args(argc, argv, "stat", kStatUsage, &w, &path);
  if (!c) return 1;
  // INTERVAL: seconds when bare, as iostat's, to the millisecond (0.5, 250ms).
  constexpr blkmq::base::TimeRule kInterval{.lo_ns = blkmq::base::kNsPerMs, .resolution_ns = blkmq::base::kNsPerMs};
  auto interval_ns = blkmq::base::parse_time_ns("INTERVAL", w.empty() ? "1" : w[0], kInterval);
  if (!interval_ns) return fail("stat", interval_ns.status().message());
  const double interval = static_cast<double>(*interval_ns) / blkmq::base::kNsPerSec;
  auto count_or = blkmq::base::parse_uint("COUNT", w.size() < 2 ? "1" : w[1], 1, INT64_MAX);
  if (!count_or) return fail("stat", count_or.status().message());
  const long count = w.size() < 2 ? -1 : static_cast<long>(*count_or);
  json l = c->request({{"op", "list"}});
  if (!l["ok"].get<bool>()) return fail("stat", l["error"].get<std::string>());
  std::vector<std::string> devs = l["devices"].get<std::vector<std::string>>();
  std::vector<StatSample> prev(devs.size());
  std::vector<std::map<std::string, GroupSample>> prev_groups(devs.size());
  for (size_t i = 0; i < devs.size(); i++) {
    if (!sample(*c, devs[i], &prev[i])) return fail("stat", devs[i] + ": no stat");
    prev_groups[i] = group_samples(*c, devs[i]);
  }
  uint64_t t0 = blkmq::base::now_ns();
  for (long n = 0; count < 0 || n < count; n++) {
    // The server answers one connection at a time: hold none while asleep,
    // so a `blkmq attr` meanwhile is not kept waiting for the interval.
    c.reset();
    std::this_thread::sleep_for(std::chrono::duration<double>(interval));
    auto next = Client::connect(path);
    if (!next) return fail("stat", "the process went away: " + next.status().message());
    c = std::move(*next);
    const uint64_t t1 = blkmq::base::now_ns();
    std::printf("%-12s %10s %10s %10s %10s %8s %8s %7s %6s\n", "Device", "r/s", "w/s", "rkB/s", "wkB/s", "r_await",
                "w_await", "aqu-sz", "%util");
    for (size_t i = 0; i < devs.size(); i++) {
      StatSample s;
      if (!sample(*c, devs[i], &s)) return fail("stat", "the process went away");
      std::map<std::string, GroupSample> groups = group_samples(*c, devs[i]);
      print_line(devs[i], prev[i], s, (t1 - t0) / 1e9);
      print_groups(prev_groups[i], groups, (t1 - t0) / 1e9);
      prev[i] = s;
      prev_groups[i] = std::move(groups);
    }
    std::printf("\n");
    std::fflush(stdout);
    t0 = t1;
  }
  return 0;
}

}  // namespace control

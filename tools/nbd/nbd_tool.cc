#include "nbd/nbd_tool.h"
#include "control/control.h"

#include <signal.h>
#include <unistd.h>
#include <sys/wait.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <set>
#include <vector>

#include "base/parse.h"
#include "blkmq/device.h"
#include "blkmq/iogroup.h"
#include "blkmq/sysfs_tree.h"
#include "nbd/server.h"

namespace nbdtool {
namespace {

using blkmq::nbd::Export;
using blkmq::nbd::ExportDef;

// One export: its device, made as blkmq bench makes one, and what the
// handshake says of it.
struct ExportOpts {
  std::string name, description;
  std::string driver = "null";
  blkmq::ParamMap params;  // driver parameters and attr:PATH
  bool read_only = false;
  uint16_t weight = 100;
  std::string group;  // --group: the I/O group of its connections ("" the root)
  // --alias NAME=W[@GROUP]: more names for this device, each with its
  // connections' weight and group.
  struct Alias {
    std::string name;
    uint16_t weight;
    std::string group;
  };
  std::vector<Alias> aliases;
};

struct Options {
  blkmq::nbd::ServerConfig server;
  std::vector<ExportOpts> exports{1};
  std::string run;
  std::string blktrace_dir;  // --blktrace: every export's device traced while serving
  std::string control_path;  // --control: the control socket (blkmq attr, blkmq stat)
  std::string sysfs_dir;     // --sysfs: the devices' sysfs-like tree (iostat -f)
};

constexpr const char* kUsage =
    "usage: blkmq nbd [--socket PATH | --port N [--bind ADDR]] [--connections N] [--handshakes N] [--run CMD]\n"
    "                 [--idle-timeout TIME] [--max-inflight SIZE]\n"
    "                 [--blktrace DIR] [--control PATH] [--sysfs DIR]\n"
    "                 [--tls=off|on|require (--tls-certificates=DIR [--tls-verify-peer] | --tls-psk=FILE)]\n"
    "                 EXPORT [--export NAME EXPORT ...]\n"
    "  EXPORT: [--name NAME] [--description TEXT] [--read-only] [--weight W] [--group PATH] [--alias NAME=W[@PATH] ...]\n"
    "          [--driver NAME] [--scheduler NAME] [--attr PATH=VALUE ...] [--DRIVER-PARAM=VALUE ...]\n"
    "Serves blkmq devices (each made as blkmq bench makes it) to NBD clients. Options after --export NAME\n"
    "describe that export's own device; the first export is the default one. Each connection is an I/O\n"
    "context of its own with its export's --weight (bfq, 1..1000, default 100), in its --group (an I/O\n"
    "group, the kernel's cgroup: /tenant-a, made if missing; default the root), so one tenant's connections\n"
    "share the group's cgroup/PATH/io.* files (see blkmq attr); --alias NAME=W[@PATH] adds a name for the\n"
    "same device whose connections get weight W and group PATH. Without --socket or --port it listens on\n"
    "127.0.0.1:10809. --run CMD starts the server, runs CMD with $uri, $nbd, $port, $unixsocket,\n"
    "$exportname and $tls set for the first export (as nbdkit's captive mode), and exits with its\n"
    "status. SIGTERM and SIGINT stop it after in-flight requests finish (5 s at most; then the\n"
    "connections left are shut down).\n"
    "--socket PATH replaces only a stale socket there (one nobody answers on): a socket in use, or any other\n"
    "file, is refused. --connections N (default 16) clients are served at once, past their handshake;\n"
    "--handshakes N (default 16) more may be in their handshake, apart from them: when those are all taken,\n"
    "a new client drops the one stalled longest if it has been there 1 s, else it is closed before the\n"
    "greeting (libnbd: \"server disconnected unexpectedly\"), as are clients over --connections. TCP\n"
    "connections get keepalive probes (60 s idle, 6 probes 10 s apart). --idle-timeout TIME ends a connection\n"
    "with nothing in flight that sends nothing for TIME (seconds when bare, or 500ms, 5m; at most 1 d;\n"
    "default 0: never). --max-inflight SIZE bounds the payload buffers of all connections together (MiB\n"
    "when bare, or with a suffix k, m, g, t: 512m, 2g; at least 32 MiB; default: an eighth of the machine's\n"
    "memory, at least 256 MiB): a request that does not fit waits. Driver sizes (--size) are the driver's:\n"
    "null counts MiB when bare, as null_blk; uring, ublk and scsi count bytes, as fio, from 1 MiB up.\n"
    "TLS (STARTTLS, through GnuTLS): --tls=on offers it, --tls=require serves nothing without it.\n"
    "--tls-certificates=DIR holds server-cert.pem, server-key.pem, ca-cert.pem (needed by --tls-verify-peer,\n"
    "which requires client certificates signed by that CA) and optionally ca-crl.pem; --tls-psk=FILE holds\n"
    "psktool's username:hexkey lines, each key 16 bytes (32 hex digits) at least. --tls=on still serves\n"
    "plaintext clients, so with --tls-verify-peer it warns: only --tls=require admits verified clients alone.\n"
    "A memory-backed null device (--memory_backed=1) larger than the machine's memory is warned about.\n"
    "--blktrace DIR records each device's blktrace events while serving, into DIR/<dev>.blktrace.<cpu>\n"
    "(blkparse -i DIR/<dev>, btt, iowatcher). --control PATH listens there (owner-only) for blkmq attr and\n"
    "blkmq stat: read and write any attribute of the served devices (switch a scheduler) while they serve.\n"
    "--sysfs DIR keeps DIR/block/<dev>/ (stat, queue/*, mq/*) live, laid out as /sys/block: iostat -x -f DIR 1.\n";

// --max-inflight: MiB when bare, as it has always counted, with fio's
// suffixes; at least 32 MiB (a few requests of the largest size).
constexpr blkmq::base::SizeRule kMaxInflightRule{
    .bare_unit = blkmq::base::kMiB, .lo = 32 * blkmq::base::kMiB, .hi = blkmq::base::kPiB, .multiple = 1};

// --idle-timeout: seconds when bare, kept in whole milliseconds.
constexpr blkmq::base::TimeRule kIdleTimeoutRule{
    .hi_ns = 86400 * blkmq::base::kNsPerSec, .resolution_ns = blkmq::base::kNsPerMs};

// An error line and where the usage is, not the whole usage (issue 27: the
// error scrolled away under it).
int bad(const std::string& msg) {
  std::fprintf(stderr, "blkmq nbd: %s\nsee blkmq nbd --help\n", msg.c_str());
  return 1;
}

// An integer option in lo..hi into *out; false with *err set (base/parse.h's
// wording) when it is not.
template <typename T>
bool number(const std::string& key, const std::string& value, uint64_t lo, uint64_t hi, T* out, std::string* err) {
  auto r = blkmq::base::parse_uint("--" + key, value, lo, hi);
  if (!r) {
    *err = r.status().message();
    return false;
  }
  *out = static_cast<T>(*r);
  return true;
}

// --port, --connections, --handshakes, --idle-timeout, --max-inflight:
// true if `key` is one of them, with *err set when its value is bad.
bool server_number(const std::string& key, const std::string& value, blkmq::nbd::ServerConfig* s, std::string* err) {
  if (key == "port") {
    number(key, value, 0, 65535, &s->port, err);
  } else if (key == "connections" || key == "handshakes") {
    number(key, value, 1, 4096, key == "connections" ? &s->max_connections : &s->max_handshakes, err);
  } else if (key == "idle-timeout") {
    auto r = blkmq::base::parse_time_ns("--idle-timeout", value, kIdleTimeoutRule);
    if (r) s->conn.idle_timeout_ms = static_cast<unsigned>(*r / blkmq::base::kNsPerMs);
    else *err = r.status().message();
  } else if (key == "max-inflight") {
    auto r = blkmq::base::parse_size("--max-inflight", value, kMaxInflightRule);
    if (r) s->max_inflight_bytes = *r;
    else *err = r.status().message();
  } else {
    return false;
  }
  return true;
}

// A group path for --group or an alias's @PATH into *out; false with *err
// set when io_group_create would refuse it, so the error comes before any
// device is made.
bool group_path(const std::string& what, const std::string& value, std::string* out, std::string* err) {
  if (blkmq::Status st = blkmq::io_group_check_path(value); !st) {
    *err = what + ": " + st.message();
    return false;
  }
  *out = value;
  return true;
}

// --alias NAME=W[@PATH], `eq` the position of its '='.
bool alias(const std::string& value, size_t eq, ExportOpts* e, std::string* err) {
  ExportOpts::Alias a{value.substr(0, eq), 0, {}};
  std::string w = value.substr(eq + 1);
  if (const size_t at = w.find('@'); at != std::string::npos) {
    if (!group_path("--alias " + a.name, w.substr(at + 1), &a.group, err)) return false;
    w.resize(at);
  }
  if (!number("alias " + a.name, w, 1, 1000, &a.weight, err)) return false;
  e->aliases.push_back(std::move(a));
  return true;
}

// An option of the export being described; false if its value is bad
// (*err says why). Keys that are no export option are driver parameters.
bool export_option(const std::string& key, const std::string& value, ExportOpts* e, std::string* err) {
  const size_t eq = value.find('=');
  if (key == "name") e->name = value;
  else if (key == "description") e->description = value;
  else if (key == "driver") e->driver = value;
  else if (key == "scheduler") e->params["attr:queue/scheduler"] = value;
  else if (key == "weight") return number(key, value, 1, 1000, &e->weight, err);
  else if (key == "group") return group_path("--group", value, &e->group, err);
  else if (key == "attr" && eq != std::string::npos && eq > 0)
    e->params["attr:" + value.substr(0, eq)] = value.substr(eq + 1);
  else if (key == "attr") *err = blkmq::base::invalid_value("--attr", value, "is not accepted", "PATH=VALUE").message();
  else if (key == "alias" && eq != std::string::npos && eq > 0) return alias(value, eq, e, err);
  else if (key == "alias") *err = blkmq::base::invalid_value("--alias", value, "is not accepted", "NAME=W[@PATH]").message();
  else e->params[key] = value;
  return err->empty();
}

bool tls_mode(const std::string& s, blkmq::nbd::TlsMode* m) {
  using blkmq::nbd::TlsMode;
  if (s == "off") *m = TlsMode::off;
  else if (s == "on") *m = TlsMode::on;
  else if (s == "require") *m = TlsMode::require;
  else return false;
  return true;
}

// The TLS options agree with each other: -1 when they do, else the exit
// status. Credentials without --tls=on|require are refused rather than
// ignored, so that nobody serves plaintext believing it is TLS.
int check_tls(const Options& o) {
  const blkmq::nbd::TlsConfig& t = o.server.tls;
  const bool creds = !t.certificates.empty() || !t.psk_file.empty();
  if (!t.certificates.empty() && !t.psk_file.empty()) return bad("--tls-certificates and --tls-psk exclude each other");
  if (t.verify_peer && t.psk_file.empty() && t.certificates.empty()) return bad("--tls-verify-peer needs --tls-certificates");
  if (t.verify_peer && !t.psk_file.empty()) return bad("--tls-verify-peer works with --tls-certificates, not --tls-psk");
  if (t.mode == blkmq::nbd::TlsMode::off && (creds || t.verify_peer))
    return bad("--tls-certificates, --tls-psk and --tls-verify-peer need --tls=on or --tls=require");
  if (t.mode != blkmq::nbd::TlsMode::off && !creds) return bad("--tls=on|require needs --tls-certificates=DIR or --tls-psk=FILE");
  return -1;
}

// A TCP listener reachable from other hosts without TLS: anyone who can
// reach the port reads and writes the device.
void warn_plaintext(const Options& o) {
  if (!o.server.socket_path.empty() || o.server.tls.mode != blkmq::nbd::TlsMode::off) return;
  if (o.server.bind.rfind("127.", 0) == 0) return;
  std::fprintf(stderr, "blkmq nbd: warning: serving %s without TLS: any host that reaches it can read and write the "
               "device (see --tls)\n", o.server.bind.c_str());
}

// --tls=on serves plaintext clients too, so --tls-verify-peer checks only
// the clients that choose TLS: whoever the certificate was meant to keep
// out connects without it.
void warn_unverified_plaintext(const Options& o) {
  const blkmq::nbd::TlsConfig& t = o.server.tls;
  if (t.mode != blkmq::nbd::TlsMode::on || !t.verify_peer) return;
  std::fprintf(stderr, "blkmq nbd: warning: --tls=on with --tls-verify-peer still serves plaintext clients, "
               "which no certificate check applies to; use --tls=require to admit only verified clients\n");
}

// A memory-backed null device keeps every written page in this process:
// larger than the machine's memory, filling it ends in the OOM killer.
void warn_memory_backed(const std::vector<ExportOpts>& eos, const std::vector<std::unique_ptr<blkmq::Device>>& devs) {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return;
  const uint64_t phys = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
  for (size_t i = 0; i < eos.size() && i < devs.size(); i++) {
    auto mb = eos[i].params.find("memory_backed");
    if (eos[i].driver != "null" || mb == eos[i].params.end()) continue;
    // The device exists, so its driver took the value: it parses.
    if (auto on = blkmq::base::parse_bool("memory_backed", mb->second); !on || !*on) continue;
    if (devs[i]->size_bytes() <= phys) continue;
    std::fprintf(stderr, "blkmq nbd: warning: memory-backed device %s (%llu MiB) is larger than this machine's "
                 "memory (%llu MiB): writing it all would exhaust memory\n", devs[i]->queue().name().c_str(),
                 static_cast<unsigned long long>(devs[i]->size_bytes() >> 20),
                 static_cast<unsigned long long>(phys >> 20));
  }
}

// --key=value or --key value; flags take no value. Unknown keys are the
// current export's driver parameters (create_device refuses the ones it does
// not know).
int parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a.rfind("--", 0) != 0) return bad("unexpected argument '" + a + "'");
    if (a == "--read-only" || a == "--readonly") {
      o->exports.back().read_only = true;
      continue;
    }
    if (a == "--tls-verify-peer") {
      o->server.tls.verify_peer = true;
      continue;
    }
    std::string key = a.substr(2), value, err;
    if (const size_t eq = key.find('='); eq != std::string::npos) {
      value = key.substr(eq + 1);
      key.resize(eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return bad("--" + key + " needs a value");
    }
    if (key == "socket") o->server.socket_path = value;
    else if (server_number(key, value, &o->server, &err)) {
      if (!err.empty()) return bad(err);
    } else if (key == "bind") o->server.bind = value;
    else if (key == "tls" && tls_mode(value, &o->server.tls.mode)) continue;
    else if (key == "tls") return bad(blkmq::base::invalid_value("--tls", value, "is not accepted", "off, on or require").message());
    else if (key == "tls-certificates") o->server.tls.certificates = value;
    else if (key == "tls-psk") o->server.tls.psk_file = value;
    else if (key == "run") o->run = value;
    else if (key == "blktrace" && !value.empty()) o->blktrace_dir = value;
    else if (key == "control" && !value.empty()) o->control_path = value;
    else if (key == "sysfs" && !value.empty()) o->sysfs_dir = value;
    else if (key == "export") o->exports.emplace_back().name = value;
    else if (!export_option(key, value, &o->exports.back(), &err)) return bad(err);
  }
  if (!o->server.socket_path.empty() && o->server.port >= 0) return bad("--socket and --port exclude each other");
  return check_tls(*o);
}

ExportDef export_of(const ExportOpts& o, blkmq::Device& dev) {
  const blkmq::QueueLimits& l = dev.queue().limits();
  ExportDef e;
  e.name = o.name;
  e.description = o.description;
  e.size = dev.size_bytes();
  e.min_block = l.logical_block_size;
  e.pref_block = l.logical_block_size > 4096 ? l.logical_block_size : 4096;
  // One device behind every connection, no per-connection cache: a FLUSH on
  // one makes every connection's completed writes durable, so multi-conn holds.
  e.tx_flags = blkmq::nbd::kTxSendFlush | blkmq::nbd::kTxSendFua | blkmq::nbd::kTxCanMultiConn |
               blkmq::nbd::kTxSendCache;
  // A device set read-only (`--attr ro=1`) is exported read-only too, so a
  // client learns it at the handshake rather than from its first write's EPERM.
  auto ro = dev.queue().attr("ro");
  if (o.read_only || (ro && *ro == "1")) e.tx_flags |= blkmq::nbd::kTxReadOnly;
  if (l.max_discard_sectors) e.tx_flags |= blkmq::nbd::kTxSendTrim;
  // FAST_ZERO is offered with every WRITE_ZEROES: where the device cannot
  // zero cheaply the server answers it ENOTSUP at once, which is what a
  // client asking it wants to learn.
  if (l.max_write_zeroes_sectors) e.tx_flags |= blkmq::nbd::kTxSendWriteZeroes | blkmq::nbd::kTxSendFastZero;
  e.base_allocation = dev.reports_allocation();
  return e;
}

// The devices, and the exports the handshake lists (aliases after their
// export, with the same device), in `hs` and `exports` in the same order.
blkmq::Status make_exports(const Options& o, std::vector<std::unique_ptr<blkmq::Device>>* devs,
                           blkmq::nbd::HandshakeConfig* hs, std::vector<Export>* exports) {
  std::set<std::string> names;
  for (const ExportOpts& eo : o.exports) {
    auto dev = blkmq::create_device(eo.driver, eo.params);
    if (!dev) return blkmq::Status::invalid("export '" + eo.name + "': " + dev.status().message());
    blkmq::Device& d = *devs->emplace_back(std::move(*dev));
    const ExportDef def = export_of(eo, d);
    std::vector<ExportOpts::Alias> named = {{eo.name, eo.weight, eo.group}};
    named.insert(named.end(), eo.aliases.begin(), eo.aliases.end());
    for (const ExportOpts::Alias& a : named) {
      if (!names.insert(a.name).second) return blkmq::Status::invalid("export name '" + a.name + "' given twice");
      // Groups live as long as the process: connections join them until the end.
      auto g = blkmq::io_group_create(a.group);
      if (!g) return blkmq::Status::invalid("export '" + a.name + "': " + g.status().message());
      hs->exports.push_back(def);
      hs->exports.back().name = a.name;
      exports->push_back({hs->exports.back(), &d.queue(), &d, a.weight, *g == blkmq::io_group_root() ? nullptr : *g});
    }
  }
  return blkmq::Status::OK();
}

// Runs --run's command with nbdkit's captive-mode variables set, for the
// first export: $uri, $nbd (qemu's old nbd: string), $port and $unixsocket
// (one of them empty), $exportname and $tls (0 off, 1 on, 2 require). Its
// exit status.
int run_captive(const std::string& cmd, const blkmq::nbd::Server& s, const Options& o) {
  const std::string& name = o.exports.front().name;
  setenv("uri", s.uri(name).c_str(), 1);
  const std::string exp = name.empty() ? "" : ":exportname=" + name;
  const std::string& host = o.server.bind;
  const std::string nbd = !s.socket_path().empty() ? "nbd:unix:" + s.socket_path() + exp
                                                    : "nbd:" + host + ":" + std::to_string(s.port()) + exp;
  setenv("nbd", nbd.c_str(), 1);
  setenv("port", s.socket_path().empty() ? std::to_string(s.port()).c_str() : "", 1);
  setenv("unixsocket", s.socket_path().c_str(), 1);
  setenv("exportname", name.c_str(), 1);
  const blkmq::nbd::TlsMode m = o.server.tls.mode;
  setenv("tls", m == blkmq::nbd::TlsMode::off ? "0" : m == blkmq::nbd::TlsMode::on ? "1" : "2", 1);
  const int rc = std::system(cmd.c_str());
  if (rc == -1) return 1;
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + (WIFSIGNALED(rc) ? WTERMSIG(rc) : 0);
}

// Ends each device's trace once its last request ended (a freeze drains
// them), and warns of what a trace lost, as blktrace does.
void stop_traces(const std::vector<std::unique_ptr<blkmq::Device>>& devs) {
  for (const auto& d : devs) {
    blkmq::Queue& q = d->queue();
    q.freeze();
    const blkmq::BlktraceResult r = q.stop_blktrace();
    q.unfreeze();
    const std::string w = blkmq::blktrace_drop_warning(
        r, "with --control PATH, set trace/act_mask (e.g. issue,complete), trace/start_lba and trace/end_lba, "
           "or trace/pid through blkmq attr; they apply while a trace runs");
    if (!w.empty()) std::fprintf(stderr, "blkmq nbd: warning: %s\n", w.c_str());
  }
}

}  // namespace

int nbd_main(int argc, char** argv) {
  Options o;
  if (int rc = parse(argc, argv, &o); rc >= 0) return rc;
  // SIGINT and SIGTERM go to the watcher thread only, which stops the server
  // outside signal context. They are blocked before the device starts its
  // threads (kblockd, driver threads): a thread that left them open would
  // take the signal and die with the process.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  warn_plaintext(o);
  warn_unverified_plaintext(o);
  std::vector<std::unique_ptr<blkmq::Device>> devs;
  blkmq::nbd::HandshakeConfig hs;
  std::vector<Export> exports;
  if (blkmq::Status st = make_exports(o, &devs, &hs, &exports); !st) return bad(st.message());
  warn_memory_backed(o.exports, devs);
  // Each device is traced until the server stopped and its last requests
  // drained (stop_traces).
  if (!o.blktrace_dir.empty())
    for (const auto& d : devs)
      if (blkmq::Status st = d->queue().start_blktrace(o.blktrace_dir); !st) return bad(st.message());
  std::unique_ptr<blkmq::SysfsTree> tree;  // removed before the devices go
  if (!o.sysfs_dir.empty()) {
    auto t = blkmq::SysfsTree::open(o.sysfs_dir);
    if (!t) return bad(t.status().message());
    tree = std::move(*t);
    for (const auto& d : devs)
      if (blkmq::Status st = tree->add(d->queue()); !st) return bad(st.message());
  }
  std::unique_ptr<control::Server> ctl;  // stops before the devices go
  if (!o.control_path.empty()) {
    std::vector<blkmq::Queue*> qs;
    for (const auto& d : devs) qs.push_back(&d->queue());
    auto c = control::Server::start(o.control_path, qs);
    if (!c) return bad(c.status().message());
    ctl = std::move(*c);
  }
  auto server = blkmq::nbd::Server::listen(o.server, hs, exports);
  if (!server) return bad(server.status().message());
  blkmq::nbd::Server& s = **server;
  for (const Export& e : exports) {
    const std::string name = e.def.name.empty() ? "the default export" : "'" + e.def.name + "'";
    const std::string group = e.group ? ", group " + blkmq::io_group_path(e.group) : "";
    std::fprintf(stderr, "blkmq nbd: serving %s (%s, %llu bytes, weight %u%s) at %s\n", name.c_str(),
                 e.dev->driver_name().c_str(), static_cast<unsigned long long>(e.def.size), e.weight, group.c_str(),
                 s.uri(e.def.name).c_str());
  }
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    const timespec tick{0, 100 * 1000 * 1000};
    while (!done.load())
      if (sigtimedwait(&sigs, nullptr, &tick) > 0) s.stop();
  });
  int rc = 0;
  if (o.run.empty()) {
    s.serve();
  } else {
    std::thread t([&] { s.serve(); });
    rc = run_captive(o.run, s, o);
    s.stop();
    t.join();
  }
  done.store(true);
  watcher.join();
  if (!o.blktrace_dir.empty()) stop_traces(devs);
  return rc;
}

}  // namespace nbdtool

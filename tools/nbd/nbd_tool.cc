#include "nbd/nbd_tool.h"

#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "blkmq/device.h"
#include "nbd/server.h"

namespace nbdtool {
namespace {

using blkmq::nbd::Export;
using blkmq::nbd::ExportDef;

struct Options {
  blkmq::nbd::ServerConfig server;
  std::string driver = "null";
  blkmq::ParamMap params;  // driver parameters and attr:PATH
  std::string name, description, run;
  bool read_only = false;
};

constexpr const char* kUsage =
    "usage: blkmq nbd [--socket PATH | --port N [--bind ADDR]] [--name EXPORT] [--description TEXT]\n"
    "                 [--read-only] [--connections N] [--run CMD] [--driver NAME] [--scheduler NAME]\n"
    "                 [--attr PATH=VALUE ...] [--DRIVER-PARAM=VALUE ...]\n"
    "Serves one blkmq device (made as blkmq bench makes it) to NBD clients. Without --socket or --port it\n"
    "listens on 127.0.0.1:10809. --run CMD starts the server, runs CMD with $uri (and $unixsocket) set,\n"
    "and exits with its status. SIGTERM and SIGINT stop it after in-flight requests finish.\n";

int bad(const std::string& msg) {
  std::fprintf(stderr, "blkmq nbd: %s\n%s", msg.c_str(), kUsage);
  return 1;
}

bool number(const std::string& s, unsigned long lo, unsigned long hi, unsigned long* out) {
  char* end = nullptr;
  errno = 0;
  const unsigned long v = std::strtoul(s.c_str(), &end, 10);
  if (s.empty() || *end || errno || v < lo || v > hi) return false;
  *out = v;
  return true;
}

// --key=value or --key value; flags take no value. Unknown keys are the
// driver's parameters (create_device refuses the ones it does not know).
int parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a.rfind("--", 0) != 0) return bad("unexpected argument '" + a + "'");
    if (a == "--read-only" || a == "--readonly") {
      o->read_only = true;
      continue;
    }
    std::string key = a.substr(2), value;
    if (const size_t eq = key.find('='); eq != std::string::npos) {
      value = key.substr(eq + 1);
      key.resize(eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return bad("--" + key + " needs a value");
    }
    unsigned long n = 0;
    if (key == "socket") o->server.socket_path = value;
    else if (key == "port" && number(value, 0, 65535, &n)) o->server.port = static_cast<int>(n);
    else if (key == "bind") o->server.bind = value;
    else if (key == "connections" && number(value, 1, 4096, &n)) o->server.max_connections = static_cast<unsigned>(n);
    else if (key == "name") o->name = value;
    else if (key == "description") o->description = value;
    else if (key == "run") o->run = value;
    else if (key == "driver") o->driver = value;
    else if (key == "scheduler") o->params["attr:queue/scheduler"] = value;
    else if (key == "attr" && value.find('=') != std::string::npos && value.find('=') > 0)
      o->params["attr:" + value.substr(0, value.find('='))] = value.substr(value.find('=') + 1);
    else if (key == "port" || key == "connections" || key == "attr") return bad("bad value '" + value + "' for --" + key);
    else o->params[key] = value;
  }
  if (!o->server.socket_path.empty() && o->server.port >= 0) return bad("--socket and --port exclude each other");
  return -1;
}

ExportDef export_of(const Options& o, blkmq::Device& dev) {
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
  if (o.read_only) e.tx_flags |= blkmq::nbd::kTxReadOnly;
  if (l.max_discard_sectors) e.tx_flags |= blkmq::nbd::kTxSendTrim;
  // FAST_ZERO is offered with every WRITE_ZEROES: where the device cannot
  // zero cheaply the server answers it ENOTSUP at once, which is what a
  // client asking it wants to learn.
  if (l.max_write_zeroes_sectors) e.tx_flags |= blkmq::nbd::kTxSendWriteZeroes | blkmq::nbd::kTxSendFastZero;
  e.base_allocation = dev.reports_allocation();
  return e;
}

// Runs --run's command with $uri and $unixsocket set; its exit status.
int run_captive(const std::string& cmd, const blkmq::nbd::Server& s) {
  setenv("uri", s.uri().c_str(), 1);
  if (!s.socket_path().empty()) setenv("unixsocket", s.socket_path().c_str(), 1);
  const int rc = std::system(cmd.c_str());
  if (rc == -1) return 1;
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + (WIFSIGNALED(rc) ? WTERMSIG(rc) : 0);
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
  auto dev = blkmq::create_device(o.driver, o.params);
  if (!dev) return bad(dev.status().message());
  blkmq::nbd::HandshakeConfig hs;
  hs.exports.push_back(export_of(o, **dev));
  const std::vector<Export> exports = {{hs.exports.front(), &(*dev)->queue(), dev->get()}};
  auto server = blkmq::nbd::Server::listen(o.server, hs, exports);
  if (!server) return bad(server.status().message());
  blkmq::nbd::Server& s = **server;
  std::fprintf(stderr, "blkmq nbd: serving %s (%s, %llu bytes) at %s\n", o.name.empty() ? "the default export" : o.name.c_str(),
               o.driver.c_str(), static_cast<unsigned long long>(hs.exports.front().size), s.uri().c_str());
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
    rc = run_captive(o.run, s);
    s.stop();
    t.join();
  }
  done.store(true);
  watcher.join();
  return rc;
}

}  // namespace nbdtool

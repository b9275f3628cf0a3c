// The control socket's server side and its client connection.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <nlohmann/json.hpp>

#include "control/control.h"

namespace control {
namespace {

using blkmq::Status;
using nlohmann::json;

// A request line longer than this is refused: no attribute value is near it.
constexpr size_t kMaxLine = 64 * 1024;
// Clients served at once, each on its own thread: enough for a few
// `blkmq attr`/`stat` and a monitoring loop, and a bound on the threads a
// local user can make the process start.
constexpr size_t kMaxClients = 8;
// An answer the client does not take within this long ends its connection.
constexpr int kSendTimeoutMs = 2000;

Status sys_error(const std::string& what) { return Status::error(errno, what + ": " + std::strerror(errno)); }

blkmq::Result<sockaddr_un> address(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof a.sun_path)
    return Status::invalid("control socket path must be 1.." + std::to_string(sizeof a.sun_path - 1) + " bytes");
  std::memcpy(a.sun_path, path.data(), path.size());
  return a;
}

std::string refuse(const std::string& why) { return json{{"ok", false}, {"error", why}}.dump(); }

// The peer is this process's user, or root.
bool peer_allowed(int fd) {
  ucred c{};
  socklen_t len = sizeof c;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c, &len) != 0) return false;
  return c.uid == 0 || c.uid == geteuid();
}

bool write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

bool is_one(const blkmq::Result<std::string>& v) { return v.ok() && v.value() == "1"; }

// The drop warning of q's last trace (trace/dropped), "" if it lost nothing.
std::string drop_warning(const blkmq::Queue& q) {
  blkmq::BlktraceResult r;
  const blkmq::Result<std::string> dropped = q.attr("trace/dropped"), dir = q.attr("trace/dir");
  if (!dropped.ok() || !dir.ok()) return "";
  r.dropped = std::strtoull(dropped.value().c_str(), nullptr, 10);
  r.path_prefix = dir.value() + "/" + q.name();
  return blkmq::blktrace_drop_warning(
      r, "set trace/act_mask, trace/start_lba and trace/end_lba, or trace/pid (blkmq attr --control PATH " +
             q.name() + " trace/act_mask=issue,complete); they apply while a trace runs");
}

}  // namespace

blkmq::Result<std::unique_ptr<Server>> Server::start(const std::string& path, std::vector<blkmq::Queue*> queues) {
  auto addr = address(path);
  if (!addr) return addr.status();
  std::unique_ptr<Server> s(new Server());
  s->path_ = path;
  s->queues_ = std::move(queues);
  // Owner-only before listen(): until then nobody can connect.
  auto l = blkmq::nbd::listen_unix_path(path, 8, 0600);
  if (!l) return Status::error(l.status().code(), "control socket: " + l.status().message());
  s->listener_ = *l;
  s->listen_fd_ = l->fd;
  if (::pipe2(s->stop_pipe_, O_CLOEXEC) != 0) return sys_error("control socket pipe");
  s->thread_ = std::thread([p = s.get()] { p->run(); });
  return s;
}

Server::~Server() {
  if (thread_.joinable()) {
    const char c = 0;
    (void)!::write(stop_pipe_[1], &c, 1);  // stays readable: every client thread sees it too
    thread_.join();
  }
  // A client thread blocked sending to a peer that does not read is woken
  // by the shutdown, not left to its send timeout.
  {
    std::lock_guard g(mu_);
    for (Conn& c : conns_) ::shutdown(c.fd, SHUT_RDWR);
  }
  reap(true);
  blkmq::nbd::close_unix_listener(&listener_, path_);  // removes the socket if still ours
  for (int fd : {stop_pipe_[0], stop_pipe_[1]})
    if (fd >= 0) ::close(fd);
}

// Joins (outside mu_) and closes the finished client connections, or all.
void Server::reap(bool all) {
  std::list<Conn> ended;
  {
    std::lock_guard g(mu_);
    for (auto it = conns_.begin(); it != conns_.end();) {
      auto next = std::next(it);
      if (all || it->done.load()) ended.splice(ended.end(), conns_, it);
      it = next;
    }
  }
  for (Conn& c : ended) {
    c.t.join();
    ::close(c.fd);
  }
}

void Server::run() {
  for (;;) {
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {stop_pipe_[0], POLLIN, 0}};
    if (::poll(p, 2, -1) < 0 && errno != EINTR) return;
    if (p[1].revents) return;
    if (!(p[0].revents & POLLIN)) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    reap(false);
    // Every send is bounded: a client that stops reading loses its
    // connection instead of holding a thread.
    const timeval tv{kSendTimeoutMs / 1000, (kSendTimeoutMs % 1000) * 1000};
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    std::lock_guard g(mu_);
    const char* why = !peer_allowed(fd) ? "permission denied: another user's process"
                      : conns_.size() >= kMaxClients ? "too many control connections; try again later"
                                                     : nullptr;
    if (why) {
      write_all(fd, refuse(why) + "\n");
      ::close(fd);
      continue;
    }
    Conn& c = conns_.emplace_back();
    c.fd = fd;
    c.t = std::thread([this, &c] {
      serve(c.fd);
      c.done.store(true);
    });
  }
}

// Answers each line until the peer closes, the server stops, a send times
// out, or a line exceeds kMaxLine. Leaves `fd` open (reap closes it, so a
// shutdown from the destructor never meets a reused descriptor number).
void Server::serve(int fd) const {
  std::string buf;
  char chunk[4096];
  for (;;) {
    pollfd p[2] = {{fd, POLLIN, 0}, {stop_pipe_[0], POLLIN, 0}};
    if (::poll(p, 2, -1) < 0 && errno != EINTR) return;
    if (p[1].revents) return;
    const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n <= 0) return;
    buf.append(chunk, static_cast<size_t>(n));
    for (size_t nl; (nl = buf.find('\n')) != std::string::npos;) {
      const std::string line = buf.substr(0, nl);
      buf.erase(0, nl + 1);
      if (!write_all(fd, handle(line) + "\n")) return;
    }
    if (buf.size() > kMaxLine) {
      write_all(fd, refuse("request line longer than " + std::to_string(kMaxLine) + " bytes") + "\n");
      return;
    }
  }
}

namespace {

// A request's unsigned field, or `dflt` when it is absent; false if it is
// there but not an unsigned number.
bool unsigned_field(const json& req, const char* key, uint64_t dflt, uint64_t* out) {
  if (!req.contains(key)) {
    *out = dflt;
    return true;
  }
  if (!req[key].is_number_unsigned()) return false;
  *out = req[key].get<uint64_t>();
  return true;
}

// {"op":"report"}: up to "count" zones (default: all) from the one holding
// "sector" (default 0), as Queue::report_zones gives them.
std::string report(blkmq::Queue& q, const json& req) {
  uint64_t sector = 0, count = 0;
  if (!unsigned_field(req, "sector", 0, &sector) || !unsigned_field(req, "count", q.nr_zones(), &count))
    return refuse("report: \"sector\" and \"count\" are unsigned numbers");
  auto r = q.report_zones(sector, static_cast<unsigned>(std::min<uint64_t>(count, q.nr_zones())));
  if (!r) return refuse(r.status().message());
  json zones = json::array();
  for (const blkmq::Zone& z : *r)
    zones.push_back({{"start", z.start}, {"len", z.len}, {"wp", z.wp}, {"cap", z.capacity},
                     {"type", static_cast<unsigned>(z.type)}, {"cond", static_cast<unsigned>(z.cond)}});
  return json{{"ok", true}, {"zones", zones}}.dump();
}

// What a zone command's status means, as the ioctl's caller sees it.
std::string status_text(blkmq::BlkStatus st) {
  return std::string(blkmq::blk_status_name(st)) + " (" + std::strerror(-blkmq::blk_status_to_errno(st)) + ")";
}

// {"op":"zone"}: "action" (reset, open, close, finish) on "count" zones
// (default 1) from the one starting at "sector", one command a zone, as
// blkdev_zone_mgmt; a reset of every zone is one reset-all, as there.
std::string zone_mgmt(blkmq::Queue& q, const json& req) {
  static const std::pair<const char*, blkmq::ZoneOp> kActions[] = {{"reset", blkmq::ZoneOp::reset},
                                                                    {"open", blkmq::ZoneOp::open},
                                                                    {"close", blkmq::ZoneOp::close},
                                                                    {"finish", blkmq::ZoneOp::finish}};
  const std::string action = req.contains("action") && req["action"].is_string() ? req["action"].get<std::string>() : "";
  const auto* a = std::find_if(std::begin(kActions), std::end(kActions), [&](auto& k) { return action == k.first; });
  if (a == std::end(kActions)) return refuse("zone: unknown action '" + action + "' (reset, open, close, finish)");
  uint64_t sector = 0, count = 0;
  if (!unsigned_field(req, "sector", 0, &sector) || !unsigned_field(req, "count", 1, &count))
    return refuse("zone: \"sector\" and \"count\" are unsigned numbers");
  const uint64_t zone_sectors = q.limits().chunk_sectors;
  if (!q.limits().zoned) return refuse(q.name() + ": not a zoned device");
  if (sector % zone_sectors) return refuse("zone: sector " + std::to_string(sector) + " does not start a zone");
  const uint64_t first = sector / zone_sectors;
  if (first >= q.nr_zones() || count == 0 || count > q.nr_zones() - first)
    return refuse("zone: zones " + std::to_string(first) + "+" + std::to_string(count) + " are not on the device (" +
                  std::to_string(q.nr_zones()) + " zones)");
  if (a->second == blkmq::ZoneOp::reset && first == 0 && count == q.nr_zones()) {
    const blkmq::BlkStatus st = q.zone_mgmt_sync(blkmq::ZoneOp::reset_all, 0);
    if (st != blkmq::BlkStatus::ok) return refuse(std::string("reset_all: ") + status_text(st));
    return json{{"ok", true}}.dump();
  }
  for (uint64_t z = first; z < first + count; z++) {
    const blkmq::BlkStatus st = q.zone_mgmt_sync(a->second, z * zone_sectors);
    if (st != blkmq::BlkStatus::ok)
      return refuse(action + " of the zone at sector " + std::to_string(z * zone_sectors) + ": " + status_text(st));
  }
  return json{{"ok", true}}.dump();
}

}  // namespace

blkmq::Queue* Server::find(const std::string& dev) const {
  for (blkmq::Queue* q : queues_)
    if (q->name() == dev) return q;
  return nullptr;
}

std::string Server::handle(const std::string& line) const {
  json req = json::parse(line, nullptr, false);
  if (req.is_discarded() || !req.is_object() || !req.contains("op") || !req["op"].is_string())
    return refuse("malformed request: expected a JSON object with a string \"op\"");
  auto str = [&](const char* k) { return req.contains(k) && req[k].is_string() ? req[k].get<std::string>() : ""; };
  const std::string op = str("op");
  if (op == "list") {
    json names = json::array();
    for (const blkmq::Queue* q : queues_) names.push_back(q->name());
    return json{{"ok", true}, {"devices", names}}.dump();
  }
  if (op != "attrs" && op != "get" && op != "set" && op != "report" && op != "zone")
    return refuse("unknown op '" + op + "' (list, attrs, get, set, report, zone)");
  blkmq::Queue* q = find(str("dev"));
  if (!q) return refuse("no device '" + str("dev") + "'");
  if (op == "report") return report(*q, req);
  if (op == "zone") return zone_mgmt(*q, req);
  if (op == "attrs") return json{{"ok", true}, {"attrs", q->attr_names()}}.dump();
  const std::string attr = str("attr");
  if (op == "get") {
    blkmq::Result<std::string> v = q->attr(attr);
    if (!v) return refuse(v.status().message());
    return json{{"ok", true}, {"value", *v}}.dump();
  }
  if (!req.contains("value") || !req["value"].is_string()) return refuse("set: expected a string \"value\"");
  const bool tracing = attr == "trace/enable" && is_one(q->attr("trace/enable"));
  if (Status st = q->set_attr(attr, req["value"].get<std::string>()); !st) return refuse(st.message());
  json answer{{"ok", true}};
  if (tracing && !is_one(q->attr("trace/enable"))) {
    // This write stopped a trace: what it lost is told to the writer and
    // to this process's stderr, as at the end of a run.
    if (const std::string w = drop_warning(*q); !w.empty()) {
      std::fprintf(stderr, "blkmq: warning: %s\n", w.c_str());
      answer["warning"] = w;
    }
  }
  return answer.dump();
}

json Client::request(const json& req) {
  blkmq::Result<std::string> r = call(req.dump());
  if (!r) return json{{"ok", false}, {"error", r.status().message()}};
  json a = json::parse(*r, nullptr, false);
  if (a.is_discarded() || !a.is_object()) return json{{"ok", false}, {"error", "malformed answer: " + *r}};
  return a;
}

blkmq::Result<std::unique_ptr<Client>> Client::connect(const std::string& path) {
  auto addr = address(path);
  if (!addr) return addr.status();
  std::unique_ptr<Client> c(new Client());
  c->fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (c->fd_ < 0) return sys_error("control socket");
  if (::connect(c->fd_, reinterpret_cast<const sockaddr*>(&*addr), sizeof *addr) != 0)
    return sys_error("control socket " + path);
  return c;
}

Client::~Client() {
  if (fd_ >= 0) ::close(fd_);
}

blkmq::Result<std::string> Client::call(const std::string& request) {
  if (!write_all(fd_, request + "\n")) return sys_error("control socket: send");
  char chunk[4096];
  for (size_t nl; (nl = pending_.find('\n')) == std::string::npos;) {
    const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::error(EPIPE, "control socket: the process closed the connection");
    pending_.append(chunk, static_cast<size_t>(n));
  }
  const size_t nl = pending_.find('\n');
  std::string answer = pending_.substr(0, nl);
  pending_.erase(0, nl + 1);
  return answer;
}

}  // namespace control

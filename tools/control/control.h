// The control socket of a running blkmq process (`--control PATH` on
// `blkmq bench` and `blkmq nbd`): list its devices and read and write any
// queue attribute while I/O runs, as one writes /sys/block/<dev>/queue/*
// of a kernel device, and report and manage a zoned device's zones.
// `blkmq attr`, `blkmq stat` and `blkmq zone` are its clients.
//
// Protocol: a Unix stream socket; one JSON object a line each way.
//   {"op":"list"}                          -> {"ok":true,"devices":["nullb0",...]}
//   {"op":"attrs","dev":D}                 -> {"ok":true,"attrs":["queue/scheduler",...]}
//   {"op":"get","dev":D,"attr":A}          -> {"ok":true,"value":"..."}
//   {"op":"set","dev":D,"attr":A,"value":V}-> {"ok":true}
//                                             or {"ok":true,"warning":"..."}
//   {"op":"report","dev":D[,"sector":S][,"count":N]}
//                                          -> {"ok":true,"zones":[{"start","len","wp","cap","type","cond"},...]}
//   {"op":"zone","dev":D,"action":"reset|open|close|finish","sector":S[,"count":N]}
//                                          -> {"ok":true}
// report and zone are for zoned devices: the zones from the one holding
// sector S (default 0; N default all), and a zone command on N zones
// (default 1) from the one starting at S, in 512-byte sectors; the zone
// types and conditions are linux/blkzone.h's numbers.
// The warning comes with a trace/enable=0 that stopped a trace which lost
// events (blkmq::blktrace_drop_warning); the process prints it as well.
// A refused request answers {"ok":false,"error":"..."}: an unknown device,
// op or attribute, a malformed line, or the attribute's own refusal, with
// the message Queue::set_attr gives (the one `--attr` prints).
#pragma once

#include <atomic>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "blkmq/blkmq.h"
#include "nbd/unix_listener.h"

namespace control {

class Server {
 public:
  // Listens on `path` (a stale socket file there is replaced; a live socket
  // or any other file is refused with an error naming the path) for
  // requests about `queues`, which must outlive the server. The socket is
  // owner-only (0600) before it accepts anyone, and a peer of another user
  // (other than root) is refused. Each client is served on a thread of its
  // own, 8 at most (a ninth is refused with an error line), so one stuck
  // client does not hold the others; an answer a client does not take
  // within 2 s ends its connection. An attribute write runs on the client's
  // thread, as a sysfs write runs in the writer's task. Task context.
  static blkmq::Result<std::unique_ptr<Server>> start(const std::string& path, std::vector<blkmq::Queue*> queues);
  // Stops serving (a request in progress finishes; a client blocked in a
  // send is shut down, not waited for) and removes the socket.
  ~Server();
  const std::string& path() const { return path_; }

  // One request line's answer line, without the socket: what a connection
  // gets. Any thread.
  std::string handle(const std::string& line) const;

 private:
  Server() = default;
  void run();
  struct Conn {
    int fd = -1;
    std::thread t;
    std::atomic<bool> done{false};
  };
  void serve(int fd) const;
  void reap(bool all);
  blkmq::Queue* find(const std::string& dev) const;

  std::string path_;
  std::vector<blkmq::Queue*> queues_;
  int listen_fd_ = -1;
  blkmq::nbd::UnixListener listener_;  // listen_fd_ and its socket file
  int stop_pipe_[2] = {-1, -1};
  std::thread thread_;               // accepts (run())
  std::mutex mu_;
  std::list<Conn> conns_;            // one thread per client
};

// A client connection. Task context; each call a round trip.
class Client {
 public:
  static blkmq::Result<std::unique_ptr<Client>> connect(const std::string& path);
  ~Client();
  // Sends one request object's text; the answer's text, or an error if
  // the connection failed.
  blkmq::Result<std::string> call(const std::string& request);
  // One request object's answer object, parsed; {"ok":false,"error":...}
  // when the connection failed or the answer was not a JSON object, so a
  // caller reads "ok" and then "error" or the answer's fields.
  nlohmann::json request(const nlohmann::json& req);

 private:
  int fd_ = -1;
  std::string pending_;  // bytes read past the last answer line
};

// `blkmq attr`, `blkmq stat` and `blkmq zone` (argv[0] is the subcommand).
int attr_main(int argc, char** argv);
int stat_main(int argc, char** argv);
int zone_main(int argc, char** argv);

}  // namespace control

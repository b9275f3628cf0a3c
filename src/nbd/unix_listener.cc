#include "nbd/unix_listener.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace blkmq::nbd {
namespace {

Status listener_error(const std::string& what) { return Status::error(errno, what + ": " + std::strerror(errno)); }

// What a connect() to an existing socket file says about its owner.
enum class Probe { live, stale, gone, unknown };

// Non-blocking, so a live server whose backlog is full (EAGAIN) reads as
// live at once instead of holding the caller.
Probe probe_socket(const sockaddr_un& a, int* err) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    *err = errno;
    return Probe::unknown;
  }
  const int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a);
  *err = rc == 0 ? 0 : errno;
  ::close(fd);
  if (rc == 0 || *err == EAGAIN || *err == EINPROGRESS) return Probe::live;
  if (*err == ECONNREFUSED) return Probe::stale;
  if (*err == ENOENT) return Probe::gone;
  return Probe::unknown;
}

// Clears the way for bind(): ok when nothing is at `path` or only a stale
// socket was (now removed); an error naming the path otherwise.
Status clear_path(const std::string& path, const sockaddr_un& a) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::OK();
    return listener_error("cannot listen on " + path);
  }
  if (!S_ISSOCK(st.st_mode))
    return Status::error(EEXIST, "cannot listen on " + path + ": the path exists and is not a socket (refusing to "
                                 "replace it; remove it or choose another path)");
  int err = 0;
  switch (probe_socket(a, &err)) {
    case Probe::live:
      return Status::error(EADDRINUSE, "cannot listen on " + path + ": socket in use by a running process");
    case Probe::gone:
      return Status::OK();
    case Probe::stale:
      // Nobody listens: a server that ended without removing it.
      if (::unlink(path.c_str()) != 0 && errno != ENOENT)
        return listener_error("cannot remove the stale socket " + path);
      return Status::OK();
    case Probe::unknown:
      break;
  }
  return Status::error(err, "cannot listen on " + path + ": cannot tell whether its socket is in use: " +
                                std::strerror(err));
}

bool fill_address(const std::string& path, sockaddr_un* a) {
  if (path.empty() || path.size() >= sizeof a->sun_path) return false;
  *a = sockaddr_un{};
  a->sun_family = AF_UNIX;
  std::memcpy(a->sun_path, path.data(), path.size());
  return true;
}

// A name beside `path` (the same directory, so the same file system for
// link()) that no other listener of this process or another one uses.
std::string temporary_beside(const std::string& path) {
  static std::atomic<unsigned> seq{0};
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  return dir + ".blkmq-listen." + std::to_string(::getpid()) + "." + std::to_string(seq.fetch_add(1));
}

// socket(), bind() at `a`, the mode, listen(): a listening fd, or -1 with
// errno set and nothing left at the address.
int bind_and_listen(const sockaddr_un& a, int backlog, mode_t mode) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
    const int e = errno;
    ::close(fd);
    errno = e;
    return -1;
  }
  if ((mode != 0 && ::chmod(a.sun_path, mode) != 0) || ::listen(fd, backlog) != 0) {
    const int e = errno;
    ::close(fd);
    ::unlink(a.sun_path);
    errno = e;
    return -1;
  }
  return fd;
}

}  // namespace

// The socket is made listening under a temporary name and then linked to
// `path`, so the path never names a socket that refuses connections: a
// client (or a script) that connects as soon as it sees the path gets in.
// link() also fails if `path` appeared since clear_path, where a rename
// would replace another server's socket. A path too long to leave room
// for the temporary name is bound directly, as before.
Result<UnixListener> listen_unix_path(const std::string& path, int backlog, mode_t mode) {
  sockaddr_un a{};
  if (!fill_address(path, &a))
    return Status::invalid("socket path must be 1.." + std::to_string(sizeof a.sun_path - 1) + " bytes: " + path);
  if (Status st = clear_path(path, a); !st) return st;
  const std::string tmp = temporary_beside(path);
  sockaddr_un t{};
  const bool staged = fill_address(tmp, &t);
  // Only a process that had this pid and died between its bind and its
  // unlink can have left this name: it is nobody's now.
  if (staged) ::unlink(tmp.c_str());
  UnixListener l;
  l.fd = bind_and_listen(staged ? t : a, backlog, mode);
  // EADDRINUSE: another server bound the path since the probe.
  if (l.fd < 0) return listener_error("cannot listen on " + path);
  if (staged) {
    const int rc = ::link(tmp.c_str(), path.c_str());
    const int e = errno;
    ::unlink(tmp.c_str());
    if (rc != 0) {
      ::close(l.fd);
      if (e == EEXIST) return Status::error(EADDRINUSE, "cannot listen on " + path + ": in use, made by another process just now");
      errno = e;
      return listener_error("cannot listen on " + path);
    }
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    Status err = listener_error("cannot listen on " + path);
    ::close(l.fd);
    return err;
  }
  l.dev = st.st_dev;
  l.ino = st.st_ino;
  return l;
}

void close_unix_listener(UnixListener* l, const std::string& path) {
  if (l->fd < 0) return;
  ::close(l->fd);
  l->fd = -1;
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && st.st_dev == l->dev && st.st_ino == l->ino) ::unlink(path.c_str());
}

}  // namespace blkmq::nbd

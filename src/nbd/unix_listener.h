// Listening on a Unix socket path without harming what is already there:
// the NBD server's --socket and the control server's --control share it.
//
// A path that holds a socket nobody answers on (a server that died without
// removing it) is replaced; a socket a live process still serves is refused
// as in use, so a second server cannot silently take the first one's
// clients; anything that is not a socket (a disk image given to --socket by
// mistake) is refused and left alone.
#pragma once

#include <sys/types.h>

#include <string>

#include "blkmq/status.h"

namespace blkmq::nbd {

// A bound, listening Unix socket and the identity of the file it made, so
// its owner removes that file only while it is still its own.
struct UnixListener {
  int fd = -1;
  dev_t dev = 0;
  ino_t ino = 0;
};

// Binds `path` and listens with `backlog`. The path appears only once the
// socket listens (it is made under a temporary name beside it, then
// linked), so whoever sees the path can connect. When `mode` is non-zero
// the socket file has that mode before it appears (the control socket's
// 0600). Control path, any thread; costs a
// probe connect() when a socket file is already there. Errors name the path:
// "in use" for a live socket, "not a socket" for any other file.
Result<UnixListener> listen_unix_path(const std::string& path, int backlog, mode_t mode = 0);

// Closes the listener and removes `path` if it is still the file that
// listen_unix_path made (not one a later server put there). Control path.
void close_unix_listener(UnixListener* l, const std::string& path);

}  // namespace blkmq::nbd

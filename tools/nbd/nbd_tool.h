// `blkmq nbd`: serves a blkmq device to NBD clients (nbdinfo, nbdcopy, qemu,
// fio's nbd engine) on a Unix socket or a loopback TCP port.
#pragma once

namespace nbdtool {

// Entry of the subcommand; argv[0] is "nbd". Returns 0 after a clean stop
// (SIGTERM, SIGINT), the exit status of --run's command, or 1 on a bad
// option, a device error or an address that cannot be listened on.
int nbd_main(int argc, char** argv);

}  // namespace nbdtool

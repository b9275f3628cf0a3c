// An LD_PRELOAD shim for fio's io_uring engine: its io_uring_setup without
// COOP_TASKRUN, SINGLE_ISSUER and DEFER_TASKRUN, the flags fio 3.33 sets
// and blkmq's rings cannot (any thread of an hctx submits to its ring), so
// a benchmark can tell what those flags are worth to fio itself.
// docs/PERFORMANCE.md §12 has the run. Build and use:
//   gcc -shared -fPIC -O2 -o /tmp/fio_plain_ring.so bench/fio_plain_ring.c -ldl
//   LD_PRELOAD=/tmp/fio_plain_ring.so fio --ioengine=io_uring ...
#define _GNU_SOURCE
#include <dlfcn.h>
#include <linux/io_uring.h>
#include <stdarg.h>
#include <sys/syscall.h>

// fio calls io_uring_setup through syscall(2), so that is what is wrapped;
// every other call passes through unchanged.
long syscall(long nr, ...) {
  static long (*real)(long, ...);
  if (!real) real = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
  va_list ap;
  va_start(ap, nr);
  long a[6];
  for (int i = 0; i < 6; i++) a[i] = va_arg(ap, long);
  va_end(ap);
  if (nr == __NR_io_uring_setup) {
    struct io_uring_params* p = (struct io_uring_params*)a[1];
    p->flags &= ~(IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN);
  }
  return real(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

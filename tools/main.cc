// The `blkmq` command: one binary, one subcommand per tool. Adding a tool is
// one row in kCommands.
#include <cstdio>
#include <cstring>

#include "bench/bench.h"
#include "control/control.h"
#include "nbd/nbd_tool.h"
#include "reproduce/reproduce.h"

namespace {

struct Command {
  const char* name;
  const char* summary;
  int (*main)(int argc, char** argv);  // argv[0] is the subcommand name
};

constexpr Command kCommands[] = {
    {"bench", "load generator with fio's options and output (blkmq bench --help)", bench::bench_main},
    {"reproduce", "the four seed experiments side by side with the seeds' numbers (blkmq reproduce --help)",
     repro::reproduce_main},
    {"nbd", "serve a blkmq device to NBD clients (blkmq nbd --help)", nbdtool::nbd_main},
    {"attr", "read and write the attributes of a running blkmq process (blkmq attr --help)", control::attr_main},
    {"stat", "iostat-style lines of a running blkmq process's devices (blkmq stat --help)", control::stat_main},
    {"zone", "report and manage the zones of a running blkmq process's zoned device, as blkzone (blkmq zone --help)",
     control::zone_main},
};

int usage(FILE* out) {
  std::fprintf(out, "usage: blkmq <command> [options]\n\ncommands:\n");
  for (const Command& c : kCommands) std::fprintf(out, "  %-10s %s\n", c.name, c.summary);
  std::fprintf(out, "\nblkmq <command> --help shows the options of a command; blkmq --version, the version.\n");
  return out == stdout ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage(stderr);
  if (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "help") == 0)
    return usage(stdout);
  if (std::strcmp(argv[1], "--version") == 0 || std::strcmp(argv[1], "-V") == 0) {
    std::printf("blkmq %s\n", BLKMQ_VERSION);  // the project's version (CMakeLists.txt)
    return 0;
  }
  for (const Command& c : kCommands)
    if (std::strcmp(argv[1], c.name) == 0) return c.main(argc - 1, argv + 1);
  std::fprintf(stderr, "blkmq: unknown command '%s'\n", argv[1]);
  return usage(stderr);
}

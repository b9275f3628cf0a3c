// `blkmq reproduce kernel [--short] [script options]`: the standing
// comparison of blkmq's schedulers with the kernel's own on one loop device
// (bench/kernel_fidelity.sh, docs/FIDELITY.md), started from the binary.
#pragma once

namespace repro {

// Replaces the process with bash running the checkout's
// bench/kernel_fidelity.sh, passing argv[1..] through and, unless given,
// --blkmq with this binary, so the comparison measures the build that ran
// it. argv[0] is "kernel". Returns only on failure: 2 when the script is
// not found (an installed binary without its source tree), 127 when bash
// cannot be started. Needs root and loop devices; the script says what it
// skips without them. Under a minute with --short, about 25 without.
int kernel_main(int argc, char** argv);

}  // namespace repro

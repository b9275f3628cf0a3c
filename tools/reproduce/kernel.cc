#include "reproduce/kernel.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

namespace repro {
namespace {

namespace fs = std::filesystem;

// The script of the checkout this binary was built from, or, when that
// tree moved, the one three levels above the binary (build/<tree>/tools/).
std::string fidelity_script(const fs::path& self) {
  const fs::path rel = "bench/kernel_fidelity.sh";
  std::error_code ec;
#ifdef BLKMQ_SOURCE_DIR
  if (const fs::path p = fs::path(BLKMQ_SOURCE_DIR) / rel; fs::exists(p, ec)) return p.string();
#endif
  if (!self.empty())
    if (const fs::path p = self.parent_path().parent_path().parent_path().parent_path() / rel; fs::exists(p, ec))
      return p.string();
  return "";
}

}  // namespace

int kernel_main(int argc, char** argv) {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  const std::string script = fidelity_script(ec ? fs::path() : self);
  if (script.empty()) {
    std::fprintf(stderr, "blkmq reproduce kernel: bench/kernel_fidelity.sh not found; run the binary of a source checkout\n");
    return 2;
  }
  std::vector<std::string> args = {"bash", script};
  bool has_blkmq = false;
  for (int i = 1; i < argc; i++) {
    args.emplace_back(argv[i]);
    has_blkmq |= args.back() == "--blkmq";
  }
  if (!has_blkmq && !ec) {
    args.emplace_back("--blkmq");
    args.push_back(self.string());
  }
  std::vector<char*> cargv;
  for (std::string& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  execvp("bash", cargv.data());
  std::perror("blkmq reproduce kernel: bash");
  return 127;
}

}  // namespace repro

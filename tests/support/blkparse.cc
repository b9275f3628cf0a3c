#include "support/blkparse.h"

#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace blkmq::test {
namespace {

std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  return pclose(p) == 0 ? out : "";
}

}  // namespace

bool have_blktrace_tools() {
  return std::system("blkparse -V >/dev/null 2>&1") == 0 && std::system("command -v btt >/dev/null 2>&1") == 0;
}

std::vector<BlkparseLine> blkparse(const std::string& prefix) {
  std::vector<BlkparseLine> lines;
  std::istringstream all(run("blkparse -q -i " + prefix));
  for (std::string line; std::getline(all, line);) {
    std::istringstream in(line);
    BlkparseLine f;
    for (std::string w; in >> w;) f.push_back(w);
    if (f.size() >= 7 && f[0].find(',') != std::string::npos) lines.push_back(f);
  }
  return lines;
}

std::vector<BlkparseLine> events(const std::vector<BlkparseLine>& lines, const std::string& action) {
  std::vector<BlkparseLine> out;
  for (const auto& l : lines)
    if (l[5] == action) out.push_back(l);
  return out;
}

long long event_sector(const BlkparseLine& l) {
  if (l.size() < 8) return -1;
  char* end = nullptr;
  const long long v = std::strtoll(l[7].c_str(), &end, 10);
  return end && *end == 0 ? v : -1;
}

std::string btt_report(const std::string& prefix) {
  const std::string bin = prefix + ".bin";
  if (run("blkparse -q -i " + prefix + " -d " + bin + " -O").empty() && std::system(("test -s " + bin).c_str()))
    return "";
  // btt writes its per-device IOPS and MB/s files into its working
  // directory; run it beside the trace so a test leaves nothing behind.
  const auto slash = bin.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : bin.substr(0, slash);
  return run("cd '" + dir + "' && btt -i '" + bin + "'");
}

bool btt_row(const std::string& report, const std::string& row, double* avg_s, long long* n) {
  // The first table ("==== All Devices ====", "ALL MIN AVG MAX N"): the
  // rows are named Q2Q, Q2G, G2I, Q2M, I2D, M2D, D2C, Q2C.
  std::istringstream in(report);
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    std::string name;
    double mn = 0, avg = 0, mx = 0;
    long long count = 0;
    if (f >> name >> mn >> avg >> mx >> count && name == row) {
      *avg_s = avg;
      *n = count;
      return true;
    }
  }
  return false;
}

bool btt_merges(const std::string& report, long long* q, long long* d, double* ratio) {
  const size_t table = report.find("Device Merge Information");
  if (table == std::string::npos) return false;
  // " (240,  0) |    22622    22622     1.0 | ..."
  const size_t row = report.find(") |", table);
  if (row == std::string::npos) return false;
  std::istringstream f(report.substr(row + 3));
  return static_cast<bool>(f >> *q >> *d >> *ratio);
}

}  // namespace blkmq::test

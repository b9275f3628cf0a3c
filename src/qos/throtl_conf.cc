// io.max's file: the kernel's cgroup v2 format, read and written.
#include <cinttypes>
#include <cstdio>
#include <mutex>

#include "base/cgroup_file.h"
#include "base/parse.h"
#include "core/core.h"
#include "qos/blkcg.h"
#include "qos/throtl.h"

namespace blkmq {
namespace {

constexpr const char* kKeys[4] = {"rbps", "wbps", "riops", "wiops"};

// One "key=value" into c.
Status parse_one(std::string_view tok, ThrotlConf* c) {
  const size_t eq = tok.find('=');
  const std::string_view key = tok.substr(0, eq == std::string_view::npos ? tok.size() : eq);
  int k = -1;
  for (int i = 0; i < 4; i++)
    if (key == kKeys[i]) k = i;
  if (k < 0 || eq == std::string_view::npos)
    return Status::invalid("io.max: '" + std::string(tok) +
                           "' is not a limit; expected [MAJ:MIN] rbps=N wbps=N riops=N wiops=N (N a number or max)");
  const std::string_view v = tok.substr(eq + 1);
  const std::string name = "io.max: " + std::string(key);
  uint64_t val = kThrotlNoLimit;
  if (v != "max") {
    // 0 would stop the group's I/O for good: the kernel refuses it too.
    Result<uint64_t> r = k < 2 ? base::parse_size(name, v, base::SizeRule{1, 1, ThrotlConf::kKeep - 1})
                               : base::parse_uint(name, v, 1, UINT32_MAX - 1);
    if (!r) return r.status();
    val = *r;
  }
  if (k < 2) c->bps[k] = val;
  else c->iops[k - 2] = val;
  return Status::OK();
}

std::string limit_text(uint64_t v) { return v == kThrotlNoLimit ? "max" : std::to_string(v); }

}  // namespace

Result<ThrotlConf> throtl_iomax_parse(std::string_view value) {
  ThrotlConf c;
  bool first = true;
  while (!value.empty()) {
    const size_t start = value.find_first_not_of(" \t\n");
    if (start == std::string_view::npos) break;
    value.remove_prefix(start);
    const size_t end = value.find_first_of(" \t\n");
    const std::string_view tok = value.substr(0, end);
    value.remove_prefix(tok.size());
    // The kernel's write names the device; the file already belongs to
    // one queue, so the prefix is taken as written and not checked.
    if (first && base::is_dev_number(tok)) {
      first = false;
      continue;
    }
    first = false;
    if (Status s = parse_one(tok, &c); !s) return s;
  }
  return c;
}

std::string throtl_iomax_show(const QueueImpl* q, Blkg* b) {
  if (!b) return "";
  ThrotlGroup* tg = b->tg;
  std::lock_guard<std::mutex> l(q->throtl_->lock);
  if (!tg->dir[0].limited() && !tg->dir[1].limited()) return "";
  char dev[32];
  std::snprintf(dev, sizeof dev, "%u:%u", Queue::kDevMajor, q->minor_);
  return std::string(dev) + " rbps=" + limit_text(tg->dir[0].bps) + " wbps=" + limit_text(tg->dir[1].bps) +
         " riops=" + limit_text(tg->dir[0].iops) + " wiops=" + limit_text(tg->dir[1].iops);
}

}  // namespace blkmq

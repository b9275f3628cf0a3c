// io.cost's files (io.cost.qos, io.cost.model, io.weight), its io.stat keys
// and its parameters: the kernel's formats, and its built-in device
// classes (autop) for what the user leaves to ctrl=auto.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <mutex>
#include <utility>

#include "base/cgroup_file.h"
#include "base/parse.h"
#include "core/core.h"
#include "qos/blkcg.h"
#include "qos/iocost.h"
#include "qos/iocost_internal.h"
#include "qos/rq_qos.h"

namespace blkmq {
namespace iocost {
namespace {

// The kernel's built-in parameters per device class (autop): latency
// targets in usec with no percentile (so only tag waits mark the device
// busy), vrate 1 %..10000 %, and the model's figures measured on a typical
// device of the class.
struct Autop {
  uint64_t lat_us;
  uint64_t i_lcoefs[kNrLcoefs];
};
constexpr Autop kHdd = {250000, {174019176, 41708, 370, 178075866, 42705, 378}};
constexpr Autop kSsdQd1 = {25000, {245855193, 61575, 6946, 141365009, 33716, 26796}};
constexpr Autop kSsdDfl = {25000, {488636629, 8932, 8518, 427891549, 28755, 21940}};

// ioc_autop_idx without the steps between SSD classes (docs/QOS.md).
const Autop& autop_for(const QueueImpl* q) {
  if (q->limits_.rotational) return kHdd;
  if (q->nr_requests_ <= 1) return kSsdQd1;
  return kSsdDfl;
}

// calc_lcoefs: the cost of a page from the bandwidth, and the base cost of
// a sequential and a random I/O from their IOPS less that page.
void calc_lcoefs(uint64_t bps, uint64_t seqiops, uint64_t randiops, uint64_t* page, uint64_t* seqio,
                 uint64_t* randio) {
  *page = *seqio = *randio = 0;
  if (bps) *page = (kVtimePerSec + (bps + 4095) / 4096 - 1) / ((bps + 4095) / 4096);
  if (seqiops) {
    const uint64_t v = (kVtimePerSec + seqiops - 1) / seqiops;
    if (v > *page) *seqio = v - *page;
  }
  if (randiops) {
    const uint64_t v = (kVtimePerSec + randiops - 1) / randiops;
    if (v > *page) *randio = v - *page;
  }
}

}  // namespace

void refresh_params(Ioc* ioc) {
  const Autop& a = autop_for(ioc->q);
  Params& p = ioc->params;
  if (!ioc->user_qos) {
    p.qos[kRppm] = p.qos[kWppm] = 0;
    p.qos[kRlat] = p.qos[kWlat] = a.lat_us;
    p.qos[kMin] = kVrateMinPpm;
    p.qos[kMax] = kVrateMaxPpm;
  }
  if (!ioc->user_model)
    for (int i = 0; i < kNrLcoefs; i++) p.i_lcoefs[i] = a.i_lcoefs[i];
  const uint64_t* u = p.i_lcoefs;
  calc_lcoefs(u[0], u[1], u[2], &ioc->lcoefs[kRpage], &ioc->lcoefs[kRseqio], &ioc->lcoefs[kRrandio]);
  calc_lcoefs(u[3], u[4], u[5], &ioc->lcoefs[kWpage], &ioc->lcoefs[kWseqio], &ioc->lcoefs[kWrandio]);
  // A nanosecond is kVtimePerUsec / 1000 of vtime.
  for (int d = 0; d < 2; d++) {
    ioc->done_page_ns[d].store(ioc->lcoefs[d ? kWpage : kRpage] * 1000 / kVtimePerUsec, std::memory_order_relaxed);
    ioc->done_target_ns[d].store(p.qos[d ? kWlat : kRlat] * 1000, std::memory_order_relaxed);
  }
  // ioc_refresh_period_us: a multiple of the looser latency target, 2x at
  // the 90th percentile or above, up to 10x at the 50th.
  const bool r = p.qos[kRlat] >= p.qos[kWlat];
  const uint64_t ppm = p.qos[r ? kRppm : kWppm], lat = p.qos[r ? kRlat : kWlat];
  const uint64_t multi = ppm ? std::max<uint64_t>((kMillion - ppm) / 50000, 2) : 2;
  const uint64_t period_us = std::clamp(multi * lat, kMinPeriodUs, kMaxPeriodUs);
  ioc->period_ns = period_us * 1000;
  ioc->margin_ns = ioc->period_ns * kMarginPct / 100;
  ioc->vrate_min = (p.qos[kMin] * kVtimePerUsec + kMillion - 1) / kMillion;
  ioc->vrate_max = p.qos[kMax] * kVtimePerUsec / kMillion;
}

namespace {

constexpr std::string_view kQosFile = "cgroup/io.cost.qos";
constexpr std::string_view kModelFile = "cgroup/io.cost.model";
constexpr std::string_view kWeightFile = "io.weight";

std::string dev_of(const QueueImpl* q) {
  return std::to_string(Queue::kDevMajor) + ":" + std::to_string(q->minor_);
}

// "12.34" for a value in units of 1/100 (ppm / 10000: a percentage).
std::string pct2(uint64_t hundredths) {
  char b[32];
  std::snprintf(b, sizeof b, "%" PRIu64 ".%02" PRIu64, hundredths / 100, hundredths % 100);
  return b;
}

// The value's "key=value" tokens, a leading MAJ:MIN dropped.
std::vector<std::pair<std::string_view, std::string_view>> tokens(std::string_view v, bool* bad) {
  std::vector<std::pair<std::string_view, std::string_view>> out;
  bool first = true;
  *bad = false;
  while (true) {
    const size_t s = v.find_first_not_of(" \t\n");
    if (s == std::string_view::npos) break;
    v.remove_prefix(s);
    const std::string_view tok = v.substr(0, v.find_first_of(" \t\n"));
    v.remove_prefix(tok.size());
    if (std::exchange(first, false) && base::is_dev_number(tok)) continue;
    const size_t eq = tok.find('=');
    if (eq == std::string_view::npos || eq == 0) *bad = true;
    else out.emplace_back(tok.substr(0, eq), tok.substr(eq + 1));
  }
  return out;
}

// A percentage with up to two decimals ("95.00"), as ppm.
Result<uint64_t> parse_pct_ppm(const std::string& name, std::string_view v, uint64_t lo_pct, uint64_t hi_pct) {
  const size_t dot = v.find('.');
  auto whole = base::parse_uint(name, v.substr(0, dot), lo_pct, hi_pct, "percent");
  if (!whole) return whole.status();
  uint64_t frac = 0;
  if (dot != std::string_view::npos) {
    const std::string_view f = v.substr(dot + 1);
    if (f.empty() || f.size() > 2 || f.find_first_not_of("0123456789") != std::string_view::npos)
      return base::invalid_value(name, v, "is not a percentage", "N or N.NN");
    frac = std::stoull(std::string(f)) * (f.size() == 1 ? 10 : 1);
  }
  const uint64_t ppm = *whole * 10000 + frac * 100;
  if (ppm > hi_pct * 10000) return base::invalid_value(name, v, "is out of range", "a percentage");
  return ppm;
}

// ioc_qos_write's keys into a copy of the parameters.
Status parse_qos(std::string_view v, Params* p, bool* enable, int* user) {
  bool bad;
  const std::string expected = "[MAJ:MIN] enable=0|1 ctrl=auto|user rpct=P rlat=USEC wpct=P wlat=USEC min=P max=P";
  const auto toks = tokens(v, &bad);
  if (bad || toks.empty()) return base::invalid_value("io.cost.qos", v, "is not understood", expected);
  for (const auto& [k, val] : toks) {
    const std::string name = "io.cost.qos " + std::string(k);
    Result<uint64_t> r = uint64_t{0};
    if (k == "enable") {
      r = base::parse_uint(name, val, 0, 1);
      if (r) *enable = *r;
    } else if (k == "ctrl") {
      if (val != "auto" && val != "user") return base::invalid_value(name, val, "is not auto or user", expected);
      *user = val == "user";
      continue;
    } else if (k == "rpct" || k == "wpct") {
      r = parse_pct_ppm(name, val, 0, 100);
      if (r) p->qos[k == "rpct" ? kRppm : kWppm] = *r;
    } else if (k == "rlat" || k == "wlat") {
      r = base::parse_uint(name, val, 1, UINT32_MAX, "usec");
      if (r) p->qos[k == "rlat" ? kRlat : kWlat] = *r;
    } else if (k == "min" || k == "max") {
      r = parse_pct_ppm(name, val, 1, 10000);
      if (r) p->qos[k == "min" ? kMin : kMax] = *r;
    } else {
      return base::invalid_value("io.cost.qos", k, "is not a key", expected);
    }
    if (!r) return r.status();
    if (k != "enable" && *user < 0) *user = 1;  // a target given is the user's
  }
  if (p->qos[kMin] > p->qos[kMax]) return base::invalid_value("io.cost.qos", v, "has min above max", expected);
  return Status::OK();
}

Status parse_model(std::string_view v, Params* p, int* user) {
  static constexpr const char* kKeys[kNrLcoefs] = {"rbps", "rseqiops", "rrandiops", "wbps", "wseqiops", "wrandiops"};
  const std::string expected = "[MAJ:MIN] ctrl=auto|user model=linear rbps=N rseqiops=N rrandiops=N wbps=N ...";
  bool bad;
  const auto toks = tokens(v, &bad);
  if (bad || toks.empty()) return base::invalid_value("io.cost.model", v, "is not understood", expected);
  for (const auto& [k, val] : toks) {
    const std::string name = "io.cost.model " + std::string(k);
    if (k == "ctrl") {
      if (val != "auto" && val != "user") return base::invalid_value(name, val, "is not auto or user", expected);
      *user = val == "user";
      continue;
    }
    if (k == "model") {
      if (val != "linear") return base::invalid_value(name, val, "is not a model (only linear)", expected);
      continue;
    }
    int i = 0;
    while (i < kNrLcoefs && k != kKeys[i]) i++;
    if (i == kNrLcoefs) return base::invalid_value("io.cost.model", k, "is not a key", expected);
    auto r = base::parse_uint(name, val, 1, UINT64_MAX / 2);
    if (!r) return r.status();
    p->i_lcoefs[i] = *r;
    if (*user < 0) *user = 1;
  }
  return Status::OK();
}

// Adds the policy to q for a first configuration (blk_iocost_init).
Status ensure_policy(QueueImpl* q) {
  if (Status st = iocost_register(); !st) return st;
  Status st = rq_qos_add(q, kIocostPolicy);
  return st.ok() || st.code() == EBUSY ? Status::OK() : st;
}

Status store_root(QueueImpl* q, std::string_view path, std::string_view value) {
  const bool qos = path == kQosFile;
  Params p;
  bool enable = false;
  int user = -1;  // -1: not said
  {
    // Parse against a copy of the current parameters, or the device's
    // defaults before the first write.
    std::lock_guard<std::mutex> sl(q->sysfs_lock_);
    if (Ioc* ioc = ioc_on(q)) {
      std::lock_guard<base::SpinLock> l(ioc->lock);
      p = ioc->params;
      enable = ioc->enabled;
    } else {
      Ioc dflt;
      dflt.q = q;
      refresh_params(&dflt);
      p = dflt.params;
    }
  }
  if (Status st = qos ? parse_qos(value, &p, &enable, &user) : parse_model(value, &p, &user); !st) return st;
  if (Status st = ensure_policy(q); !st) return st;
  std::lock_guard<std::mutex> sl(q->sysfs_lock_);
  Ioc* ioc = ioc_on(q);
  if (!ioc) return Status::error(EAGAIN, std::string(path) + ": io.cost was taken off the queue meanwhile; try again");
  Waiter* ready = nullptr;
  {
    std::lock_guard<base::SpinLock> l(ioc->lock);
    bool& user_flag = qos ? ioc->user_qos : ioc->user_model;
    if (user >= 0) user_flag = user;
    if (user_flag) ioc->params = p;
    refresh_params(ioc);
    if (qos) set_enabled(ioc, enable, &ready);
  }
  wake_all(ready);
  return Status::OK();
}

std::string show_qos(const Ioc* ioc, const QueueImpl* q) {
  const Params& p = ioc->params;
  return dev_of(q) + " enable=" + (ioc->enabled ? "1" : "0") + " ctrl=" + (ioc->user_qos ? "user" : "auto") +
         " rpct=" + pct2(p.qos[kRppm] / 100) + " rlat=" + std::to_string(p.qos[kRlat]) + " wpct=" +
         pct2(p.qos[kWppm] / 100) + " wlat=" + std::to_string(p.qos[kWlat]) + " min=" + pct2(p.qos[kMin] / 100) +
         " max=" + pct2(p.qos[kMax] / 100);
}

std::string show_model(const Ioc* ioc, const QueueImpl* q) {
  const uint64_t* u = ioc->params.i_lcoefs;
  return dev_of(q) + " ctrl=" + (ioc->user_model ? "user" : "auto") + " model=linear rbps=" + std::to_string(u[0]) +
         " rseqiops=" + std::to_string(u[1]) + " rrandiops=" + std::to_string(u[2]) + " wbps=" + std::to_string(u[3]) +
         " wseqiops=" + std::to_string(u[4]) + " wrandiops=" + std::to_string(u[5]);
}

// The group path of an io.weight file ("" for the root's, which cgroup v2
// does not have).
std::string_view weight_group(std::string_view path) {
  return path.substr(6, path.size() - 6 - kWeightFile.size());  // "cgroup" ... "io.weight"
}

Status store_weight(QueueImpl* q, std::string_view path, std::string_view value) {
  const std::string_view gp = weight_group(path);
  if (gp.empty() || gp == "/") return Status::invalid(std::string(path) + ": the root group has no io.weight");
  auto w = base::parse_weight_write(std::string(path), value, kIoGroupWeightMin, kIoGroupCostWeightMax);
  if (!w) return w.status();
  auto made = io_group_create(gp);
  if (!made) return made.status();
  if (w->kind == base::WeightWrite::kGroup) {
    return io_group_set_cost_weight(*made, w->weight);  // applied at each queue's next period
  }
  std::lock_guard<std::mutex> sl(q->sysfs_lock_);
  Ioc* ioc = ioc_on(q);
  if (!ioc)
    return Status::error(EOPNOTSUPP, std::string(path) + ": a device's weight needs io.cost on it: write " +
                                         std::string(kQosFile) + "=enable=1 first");
  std::lock_guard<std::mutex> tl(blkcg_tree_lock());
  IoGroup* g = io_group_find_locked(gp);
  if (!g) return Status::error(ENOENT, std::string(path) + ": the I/O group was removed");
  Blkg* b = blkg_conf_get_locked(q, g);
  std::lock_guard<std::mutex> l(iocost_mu());
  Iocg* ig = make_iocg_locked(ioc, b);
  std::lock_guard<base::SpinLock> il(ioc->lock);
  ig->cfg_weight = w->weight;  // applied at the next period
  return Status::OK();
}

Result<std::string> show_weight(const QueueImpl* q, std::string_view path) {
  const std::string_view gp = weight_group(path);
  if (gp.empty() || gp == "/") return Status::invalid(std::string(path) + ": the root group has no io.weight");
  std::lock_guard<std::mutex> sl(const_cast<QueueImpl*>(q)->sysfs_lock_);
  std::lock_guard<std::mutex> tl(blkcg_tree_lock());
  IoGroup* g = io_group_find_locked(gp);
  if (!g) return Status::error(ENOENT, std::string(path) + ": no such I/O group");
  std::string s = "default " + std::to_string(io_group_cost_weight(g));
  unsigned dev = 0;
  if (Ioc* ioc = ioc_on(q)) {
    std::lock_guard<std::mutex> l(iocost_mu());
    for (const Iocg* ig : ioc->all)
      if (ig->blkg->group == g) dev = ig->cfg_weight;
  }
  if (dev) s += "\n" + dev_of(q) + " " + std::to_string(dev);
  return s;
}

}  // namespace
}  // namespace iocost

bool iocost_attr_is(std::string_view path) {
  using namespace iocost;
  if (path == kQosFile || path == kModelFile) return true;
  return path.size() > 7 + kWeightFile.size() && path.substr(0, 7) == "cgroup/" &&
         path.substr(path.size() - kWeightFile.size()) == kWeightFile &&
         path[path.size() - kWeightFile.size() - 1] == '/';
}

Status iocost_attr_store(QueueImpl* q, std::string_view path, std::string_view value) {
  using namespace iocost;
  if (path == kQosFile || path == kModelFile) return store_root(q, path, value);
  return store_weight(q, path, value);
}

Result<std::string> iocost_attr_show(const QueueImpl* q, std::string_view path) {
  using namespace iocost;
  if (path != kQosFile && path != kModelFile) return show_weight(q, path);
  std::lock_guard<std::mutex> sl(const_cast<QueueImpl*>(q)->sysfs_lock_);
  Ioc* ioc = ioc_on(q);
  if (!ioc) {
    // Not configured yet: what the device would start with, disabled.
    Ioc dflt;
    dflt.q = const_cast<QueueImpl*>(q);
    refresh_params(&dflt);
    return path == kQosFile ? show_qos(&dflt, q) : show_model(&dflt, q);
  }
  std::lock_guard<base::SpinLock> l(ioc->lock);
  return path == kQosFile ? show_qos(ioc, q) : show_model(ioc, q);
}

std::vector<std::string> iocost_attr_names() {
  using namespace iocost;
  std::vector<std::string> out{std::string(kQosFile), std::string(kModelFile)};
  for (const std::string& p : io_group_list())
    if (p != "/") out.push_back("cgroup" + p + "/" + std::string(kWeightFile));
  return out;
}

std::string iocost_stat_keys(const QueueImpl* q, const Blkg* b) {
  using namespace iocost;
  Ioc* ioc = ioc_on(q);
  if (!ioc) return "";
  if (!b) {
    const uint64_t vp10k = (ioc->vrate.load(std::memory_order_relaxed) * 10000 + kVtimePerUsec / 2) / kVtimePerUsec;
    return " cost.vrate=" + pct2(vp10k);
  }
  std::lock_guard<std::mutex> l(iocost_mu());
  const Iocg* g = b->iocg.load(std::memory_order_acquire);
  const uint64_t usage = g ? g->usage_vt.load(std::memory_order_relaxed) / kVtimePerUsec : 0;
  const uint64_t wait = g ? g->wait_ns.load(std::memory_order_relaxed) / 1000 : 0;
  const uint64_t debt = g ? g->indebt_vt.load(std::memory_order_relaxed) / kVtimePerUsec : 0;
  return " cost.usage=" + std::to_string(usage) + " cost.wait=" + std::to_string(wait) +
         " cost.indebt=" + std::to_string(debt) + " cost.indelay=0";
}

Status iocost_info(Queue* qp, std::string_view path, IocostInfo* out) {
  using namespace iocost;
  QueueImpl* q = to_impl(qp);
  *out = IocostInfo{};
  std::lock_guard<std::mutex> sl(q->sysfs_lock_);
  Ioc* ioc = ioc_on(q);
  std::lock_guard<std::mutex> tl(blkcg_tree_lock());
  IoGroup* g = io_group_find_locked(path);
  if (!g) return Status::error(ENOENT, "I/O group '" + std::string(path) + "' does not exist");
  if (!ioc) return Status::OK();
  out->on_queue = true;
  std::lock_guard<std::mutex> l(iocost_mu());
  std::lock_guard<base::SpinLock> il(ioc->lock);
  out->enabled = ioc->enabled;
  out->vrate_ppm = ioc->vrate.load() * kMillion / kVtimePerUsec;
  out->period_ns = ioc->period_ns;
  out->busy_level = ioc->busy_level;
  out->periods = ioc->periods.load();
  for (Iocg* ig : ioc->all) {
    if (ig->blkg->group != g) continue;
    out->tracked = true;
    out->active = ig->active != 0;
    out->weight = ig->weight;
    out->hweight = ig->active ? hweight_locked(ig) : 0;
    out->usage_ns = ig->usage_vt.load() * 1000 / kVtimePerUsec;
    out->wait_ns = ig->wait_ns.load();
    out->waiting = ig->nr_waiting.load();
  }
  return Status::OK();
}

}  // namespace blkmq

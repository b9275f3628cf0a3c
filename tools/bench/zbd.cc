// fio's zonemode=zbd: the device's zones and the per-I/O adjustments (see
// zbd.h). fio's zbd.c is the reference for every rule here.
#include "bench/zbd.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace bench {
namespace {

std::mutex g_devices_mu;
std::map<const blkmq::Queue*, std::weak_ptr<ZbdDevice>> g_devices;

std::string num(uint64_t v) { return std::to_string(v); }

}  // namespace

blkmq::Result<std::shared_ptr<ZbdDevice>> ZbdDevice::get(blkmq::Queue& q, const ZbdOptions& o) {
  std::lock_guard lk(g_devices_mu);
  if (auto d = g_devices[&q].lock()) return d;
  std::shared_ptr<ZbdDevice> d(new ZbdDevice(q));
  if (Status st = d->load(o); !st) return st;
  g_devices[&q] = d;
  return d;
}

// zbd_init_zone_info: the device's report, or fio's emulation of zones on
// a device without them (all sequential, empty, zonecapacity writable).
Status ZbdDevice::load(const ZbdOptions& o) {
  const blkmq::QueueLimits& l = q_.limits();
  const uint64_t dev_bytes = l.capacity_sectors << blkmq::kSectorShift;
  unsigned dev_max_open = 0;
  if (l.zoned) {
    zone_size_ = uint64_t{l.chunk_sectors} << blkmq::kSectorShift;
    if (o.zone_size && o.zone_size != zone_size_)
      return Status::invalid("zonesize=" + num(o.zone_size) + " differs from the device's zone size " + num(zone_size_));
    if (o.zone_capacity)
      return Status::invalid("zonecapacity applies to emulated zones only; the device reports its own");
    auto r = q_.report_zones(0, q_.nr_zones());
    if (!r) return Status::invalid("zone report: " + r.status().message());
    for (const blkmq::Zone& z : *r) {
      Zone s;
      s.start = z.start << blkmq::kSectorShift;
      s.len = z.len << blkmq::kSectorShift;
      s.capacity = z.capacity << blkmq::kSectorShift;
      s.conventional = z.type == blkmq::ZoneType::conventional;
      const bool no_wp = z.cond == blkmq::ZoneCond::full || z.cond == blkmq::ZoneCond::readonly ||
                         z.cond == blkmq::ZoneCond::offline || z.wp == blkmq::kZoneInvalidWp;
      s.wp = s.conventional ? s.start : no_wp ? s.start + s.capacity : z.wp << blkmq::kSectorShift;
      zones.push_back(s);
    }
    dev_max_open = l.max_open_zones;
  } else {
    emulated_ = true;
    zone_size_ = o.zone_size;
    if (!zone_size_) return Status::invalid("zonemode=zbd on a device without zones needs zonesize");
    const uint64_t cap = o.zone_capacity ? o.zone_capacity : zone_size_;
    if (cap > zone_size_) return Status::invalid("zonecapacity " + num(cap) + " exceeds zonesize " + num(zone_size_));
    for (uint64_t s = 0; s + zone_size_ <= dev_bytes; s += zone_size_) zones.push_back({s, zone_size_, cap, s});
    if (zones.empty()) return Status::invalid("zonesize " + num(zone_size_) + " exceeds the device");
  }
  if (o.zone_range && o.zone_range != zone_size_)
    return Status::invalid("zonerange=" + num(o.zone_range) + " must equal the zone size " + num(zone_size_));
  max_open_ = dev_max_open;
  if (o.max_open_zones) {
    if (dev_max_open && o.max_open_zones > dev_max_open && !o.ignore_zone_limits)
      return Status::invalid("max_open_zones=" + num(o.max_open_zones) + " exceeds the device's limit " +
                             num(dev_max_open) + " (ignore_zone_limits=1 allows it)");
    max_open_ = o.max_open_zones;
  }
  for (const Zone& z : zones)
    if (!z.conventional) data_bytes += z.wp - z.start;
  return Status::OK();
}

// zbd_open_zone: a zone already being written, or room under the device's
// and the job's limits.
bool ZbdDevice::open_zone(unsigned z, int job, unsigned job_limit) {
  if (std::find(open.begin(), open.end(), z) != open.end()) return true;
  if (max_open_ && open.size() >= max_open_) return false;
  if (job_limit) {
    const auto mine = std::count_if(open.begin(), open.end(), [&](unsigned o) { return zones[o].writer == job; });
    if (static_cast<unsigned>(mine) >= job_limit) return false;
  }
  open.push_back(z);
  zones[z].writer = job;
  return true;
}

void ZbdDevice::close_zone(unsigned z) {
  open.erase(std::remove(open.begin(), open.end(), z), open.end());
  zones[z].writer = -1;
}

blkmq::Result<std::unique_ptr<ZbdJob>> ZbdJob::create(std::shared_ptr<ZbdDevice> dev, const ZbdOptions& o, int job,
                                                     uint64_t* base, uint64_t* size, uint32_t bs, bool random,
                                                     uint64_t seed, std::string* notes) {
  const uint64_t zs = dev->zone_size();
  if (bs > zs) return Status::invalid("bs " + num(bs) + " exceeds the zone size " + num(zs));
  if (o.job_max_open_zones && dev->max_open() && o.job_max_open_zones > dev->max_open())
    return Status::invalid("job_max_open_zones=" + num(o.job_max_open_zones) + " exceeds max_open_zones " +
                           num(dev->max_open()));
  // zbd_verify_sizes: whole zones only.
  const uint64_t b = (*base + zs - 1) / zs * zs;
  const uint64_t e = std::min<uint64_t>((*base + *size) / zs, dev->zones.size()) * zs;
  if (e <= b) return Status::invalid("the job's region holds no whole zone of " + num(zs) + " bytes");
  if (b != *base) *notes += "rounded up offset from " + num(*base) + " to " + num(b) + "\n";
  if (e - b != *size) *notes += "rounded down io_size from " + num(*size) + " to " + num(e - b) + "\n";
  std::unique_ptr<ZbdJob> j(new ZbdJob(std::move(dev), o, job, bs, random, seed));
  j->first_ = static_cast<unsigned>(b / zs);
  j->end_ = static_cast<unsigned>(e / zs);
  j->range_bytes_ = e - b;
  if (o.reset_frequency > 0) j->write_cnt_ = static_cast<uint64_t>(std::ceil(1.0 / o.reset_frequency));
  *base = b;
  *size = e - b;
  return j;
}

ZbdJob::Adjust ZbdJob::adjust(bool write, uint64_t* offset, uint32_t* len, unsigned* zone) {
  std::lock_guard lk(dev_->mu);
  return write ? adjust_write(offset, len, zone) : adjust_read(offset, len);
}

ZbdJob::Adjust ZbdJob::adjust_write(uint64_t* offset, uint32_t* len, unsigned* zone) {
  ZbdDevice& d = *dev_;
  unsigned z = std::clamp(zone_of(*offset), first_, end_ - 1);
  // A sequential job past a zone's capacity goes on at the next zone.
  if (!random_ && !d.zones[z].conventional && *offset >= d.zones[z].start + d.zones[z].capacity)
    z = z + 1 == end_ ? first_ : z + 1;
  if (d.zones[z].conventional) return Adjust::ok;
  if (!d.open_zone(z, job_, o_.job_max_open_zones)) {
    // zbd_convert_to_write_zone: a zone being written already, at random
    // (this job's own under job_max_open_zones).
    std::vector<unsigned> cand;
    for (unsigned o : d.open)
      if (o >= first_ && o < end_ && (!o_.job_max_open_zones || d.zones[o].writer == job_)) cand.push_back(o);
    if (cand.empty()) return Adjust::eof;
    z = cand[rng_.next() % cand.size()];
  }
  ZbdDevice::Zone& zn = d.zones[z];
  bool reset = false;
  // zone_reset_threshold and _frequency: past the threshold, every
  // (1 / frequency)th write resets its zone first. A write asked again
  // after its reset is not counted twice.
  if (write_cnt_ && !retry_ && d.data_bytes >= static_cast<uint64_t>(range_bytes_ * o_.reset_threshold) &&
      --write_cnt_ == 0) {
    write_cnt_ = static_cast<uint64_t>(std::ceil(1.0 / o_.reset_frequency));
    reset = zn.wp > zn.start;
  }
  retry_ = false;
  if (reset || zn.wp + bs_ > zn.start + zn.capacity) {
    *zone = z;
    retry_ = true;
    return Adjust::reset_first;
  }
  const uint64_t room = (zn.start + zn.capacity - zn.wp) / bs_ * bs_;
  *offset = zn.wp;
  *len = static_cast<uint32_t>(std::min<uint64_t>(*len, room));
  zn.wp += *len;
  d.data_bytes += *len;
  if (zn.wp + bs_ > zn.start + zn.capacity) d.close_zone(z);
  return Adjust::ok;
}

// Reads below the write pointer (unless read_beyond_wp): a zone without a
// block of data sends the read to the nearest one with some.
ZbdJob::Adjust ZbdJob::adjust_read(uint64_t* offset, uint32_t* len) {
  if (o_.read_beyond_wp) return Adjust::ok;
  ZbdDevice& d = *dev_;
  const unsigned orig = std::clamp(zone_of(*offset), first_, end_ - 1);
  auto data_of = [&](unsigned z) {
    const ZbdDevice::Zone& zn = d.zones[z];
    return (zn.conventional ? zn.capacity : zn.wp - zn.start) / bs_ * bs_;
  };
  unsigned z = orig;
  if (data_of(z) < bs_ || (!random_ && *offset + bs_ > d.zones[z].start + data_of(z))) {
    // zbd_find_zone: the nearest zone of the region with data, either
    // way (a sequential job: onwards, wrapping).
    bool found = false;
    for (unsigned step = 1; step < end_ - first_ && !found; step++)
      for (int dir : {1, -1}) {
        if (!random_ && dir < 0) {
          const unsigned c = first_ + (orig - first_ + step) % (end_ - first_);
          if (data_of(c) < bs_) continue;
          z = c;
          found = true;
          break;
        }
        const int64_t c = static_cast<int64_t>(orig) + dir * static_cast<int64_t>(step);
        if (c < first_ || c >= end_ || data_of(static_cast<unsigned>(c)) < bs_) continue;
        z = static_cast<unsigned>(c);
        found = true;
        break;
      }
    if (!found) return Adjust::eof;
  }
  const ZbdDevice::Zone& zn = d.zones[z];
  const uint64_t range = data_of(z);
  if (range <= *len) {
    *offset = zn.start;
    *len = static_cast<uint32_t>(range);
  } else if (z != orig || *offset + *len > zn.start + range) {
    // Within the data, keeping the generator's spread (fio: the offset
    // modulo the readable range).
    *offset = zn.start + ((*offset - d.zones[orig].start) % (range - *len)) / bs_ * bs_;
  }
  return Adjust::ok;
}

Status ZbdJob::reset(unsigned z) {
  ZbdDevice& d = *dev_;
  if (!d.emulated_) {
    const blkmq::BlkStatus st =
        d.q_.zone_mgmt_sync(blkmq::ZoneOp::reset, d.zones[z].start >> blkmq::kSectorShift);
    if (st != blkmq::BlkStatus::ok)
      return Status::error(-blkmq::blk_status_to_errno(st),
                           "zone reset at " + num(d.zones[z].start) + ": " + blkmq::blk_status_name(st));
  }
  std::lock_guard lk(d.mu);
  ZbdDevice::Zone& zn = d.zones[z];
  d.data_bytes -= zn.wp - zn.start;
  zn.wp = zn.start;
  resets_++;
  return Status::OK();
}

}  // namespace bench

// `blkmq zone`: util-linux's blkzone for the zoned devices of a running
// blkmq process, over its control socket. The report prints blkzone's
// lines, so what reads `blkzone report` reads this.
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/parse.h"
#include "control/control.h"

namespace control {
namespace {

using nlohmann::json;

constexpr const char* kZoneUsage =
    "usage: blkmq zone report|reset|open|close|finish --control PATH [-o SECTOR] [-c COUNT | -l SECTORS] DEV\n"
    "The zones of DEV, a zoned device of a running blkmq process (blkmq bench or blkmq nbd started with\n"
    "--control PATH), as util-linux's blkzone: report prints blkzone report's lines; reset, open, close and\n"
    "finish act on the zones from the one at SECTOR (default 0; for these it must start a zone), COUNT of\n"
    "them or those within SECTORS (default: to the end of the device). Sectors are 512 bytes, decimal or\n"
    "0x hex. A reset of the whole device is one reset-all.\n";

// blkzone's names for the conditions (indexed by value) and the types.
const char* const kCondNames[16] = {"nw", "em", "oi", "oe", "cl", "x5", "x6", "x7",
                                    "x8", "x9", "xA", "xB", "xC", "ro", "fu", "of"};
const char* const kTypeNames[4] = {"RESERVED", "CONVENTIONAL", "SEQ_WRITE_REQUIRED", "SEQ_WRITE_PREFERRED"};

int fail(const std::string& msg) {
  std::fprintf(stderr, "blkmq zone: %s\n", msg.c_str());
  return 1;
}

struct Args {
  std::string command, path, dev;
  uint64_t offset = 0;
  uint64_t count = 0;   // zones; 0: not given
  uint64_t length = 0;  // sectors; 0: not given
};

// A count or sector number as blkzone takes it: decimal, or 0x hex.
bool parse_sectors(const char* name, const std::string& v, uint64_t* out) {
  const bool hex = v.size() > 2 && v[0] == '0' && (v[1] == 'x' || v[1] == 'X');
  const std::string digits = hex ? v.substr(2) : v;
  if (digits.empty() || digits.find_first_not_of(hex ? "0123456789abcdefABCDEF" : "0123456789") != std::string::npos)
    return false;
  if (!hex) {
    auto n = blkmq::base::parse_uint(name, v, 0, UINT64_MAX);
    if (n) *out = *n;
    return bool(n);
  }
  if (digits.size() > 16) return false;
  *out = std::strtoull(digits.c_str(), nullptr, 16);
  return true;
}

// The option's value: "-o V", "--offset V" or "--offset=V".
bool value_of(int argc, char** argv, int* i, const std::string& a, const char* s, const char* l, std::string* v) {
  const std::string lo = std::string("--") + l;
  if (a == s || a == lo) {
    if (*i + 1 >= argc) return false;
    *v = argv[++*i];
    return true;
  }
  if (a.rfind(lo + "=", 0) == 0) {
    *v = a.substr(lo.size() + 1);
    return true;
  }
  return false;
}

blkmq::Status parse_args(int argc, char** argv, Args* out) {
  std::vector<std::string> words;
  for (int i = 1; i < argc; i++) {
    const std::string a = argv[i];
    std::string v;
    if (a == "--help" || a == "-h") {
      std::fputs(kZoneUsage, stdout);
      std::exit(0);
    }
    if (value_of(argc, argv, &i, a, "-C", "control", &out->path)) continue;
    uint64_t* num = nullptr;
    const char* name = nullptr;
    if (value_of(argc, argv, &i, a, "-o", "offset", &v)) num = &out->offset, name = "offset";
    else if (value_of(argc, argv, &i, a, "-c", "count", &v)) num = &out->count, name = "count";
    else if (value_of(argc, argv, &i, a, "-l", "length", &v)) num = &out->length, name = "length";
    if (num) {
      if (!parse_sectors(name, v, num)) return blkmq::Status::invalid(std::string(name) + ": '" + v +
                                                                     "' is not a decimal or 0x hexadecimal number");
      continue;
    }
    if (a.rfind("-", 0) == 0) return blkmq::Status::invalid("unknown option " + a);
    words.push_back(a);
  }
  if (words.size() != 2 || out->path.empty()) return blkmq::Status::invalid("expected a command, --control PATH and DEV");
  if (out->count && out->length) return blkmq::Status::invalid("--count and --length exclude each other");
  out->command = words[0];
  out->dev = words[1];
  return blkmq::Status::OK();
}


// blkzone report's line (util-linux 2.36 and later, with the capacity).
void print_zone(const json& z) {
  const uint64_t start = z["start"], len = z["len"], wp = z["wp"], cap = z["cap"];
  const unsigned type = z["type"], cond = z["cond"];
  std::printf("  start: 0x%09" PRIx64 ", len 0x%06" PRIx64 ", cap 0x%06" PRIx64 ", wptr 0x%06" PRIx64
              " reset:0 non-seq:0, zcond:%2u(%s) [type: %u(%s)]\n",
              start, len, cap, type == 1 ? 0 : wp - start, cond, kCondNames[cond & 15], type,
              kTypeNames[type & 3]);
}

// The device's zone size and count, from its attributes.
blkmq::Status geometry(Client& c, const std::string& dev, uint64_t* zone_sectors, uint64_t* nr_zones) {
  for (auto [attr, out] : {std::pair{"queue/chunk_sectors", zone_sectors}, std::pair{"queue/nr_zones", nr_zones}}) {
    json a = c.request({{"op", "get"}, {"dev", dev}, {"attr", attr}});
    if (!a["ok"].get<bool>()) return blkmq::Status::invalid(a["error"].get<std::string>());
    *out = std::strtoull(a["value"].get<std::string>().c_str(), nullptr, 10);
  }
  if (*nr_zones == 0) return blkmq::Status::invalid(dev + ": not a zoned device");
  return blkmq::Status::OK();
}

}  // namespace

int zone_main(int argc, char** argv) {
  Args args;
  if (blkmq::Status st = parse_args(argc, argv, &args); !st)
    return fail(st.message() + " (blkmq zone --help shows the usage)");
  auto c = Client::connect(args.path);
  if (!c) return fail(c.status().message());
  uint64_t zone_sectors = 0, nr_zones = 0;
  if (blkmq::Status st = geometry(**c, args.dev, &zone_sectors, &nr_zones); !st) return fail(st.message());
  const uint64_t first = args.offset / zone_sectors;
  if (first >= nr_zones) return fail("offset " + std::to_string(args.offset) + " is past the device's end");
  uint64_t count = nr_zones - first;
  if (args.count) count = std::min(args.count, count);
  if (args.length) count = std::min((args.length + zone_sectors - 1) / zone_sectors, count);
  if (args.command == "report") {
    json a = (*c)->request({{"op", "report"}, {"dev", args.dev}, {"sector", args.offset}, {"count", count}});
    if (!a["ok"].get<bool>()) return fail(a["error"].get<std::string>());
    for (const json& z : a["zones"]) print_zone(z);
    return 0;
  }
  if (args.command != "reset" && args.command != "open" && args.command != "close" && args.command != "finish")
    return fail("unknown command '" + args.command + "' (report, reset, open, close, finish)");
  if (args.offset % zone_sectors)
    return fail("offset " + std::to_string(args.offset) + " is not aligned to the zone size " +
                std::to_string(zone_sectors));
  json a = (*c)->request({{"op", "zone"}, {"dev", args.dev}, {"action", args.command}, {"sector", args.offset},
                      {"count", count}});
  if (!a["ok"].get<bool>()) return fail(a["error"].get<std::string>());
  return 0;
}

}  // namespace control

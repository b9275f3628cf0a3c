// The blktrace binary format (the kernel's include/uapi/linux/blktrace_api.h,
// version 7, as Debian 12's blktrace 1.2 reads it): one fixed 48-byte record
// per event, optionally followed by a payload, in the writer's byte order
// (blkparse tells it from the magic). Values here are the kernel's ABI.
// Internal (not installed): the engine writes it (src/core/trace.cc) and
// `blkmq bench --read_iolog` parses it; a program outside blkmq reads the
// files with blkparse, as it would a kernel trace.
#pragma once

#include <cstdint>

#include "blkmq/bio.h"

namespace blkmq::blktrace {

constexpr uint32_t kMagic = 0x65617400;  // BLK_IO_TRACE_MAGIC
constexpr uint32_t kVersion = 0x07;      // BLK_IO_TRACE_VERSION

// struct blk_io_trace.
struct Record {
  uint32_t magic;     // kMagic | kVersion
  uint32_t sequence;  // per CPU, from 1, without gaps (blkparse counts skips)
  uint64_t time;      // ns
  uint64_t sector;
  uint32_t bytes;
  uint32_t action;    // category bits << 16 | action code
  uint32_t pid;       // the thread that caused it
  uint32_t device;    // the kernel's dev_t: major << 20 | minor
  uint32_t cpu;
  uint16_t error;     // completion status: the negative errno, truncated as the kernel does
  uint16_t pdu_len;   // payload bytes after the record
};
static_assert(sizeof(Record) == 48, "struct blk_io_trace is 48 bytes");

// Category bits (enum blktrace_cat), shifted into the action's upper half.
enum Category : uint32_t {
  kTcRead = 1u << 0,
  kTcWrite = 1u << 1,
  kTcFlush = 1u << 2,
  kTcSync = 1u << 3,
  kTcQueue = 1u << 4,
  kTcRequeue = 1u << 5,
  kTcIssue = 1u << 6,
  kTcComplete = 1u << 7,
  kTcFs = 1u << 8,
  kTcPc = 1u << 9,
  kTcNotify = 1u << 10,
  kTcAhead = 1u << 11,
  kTcMeta = 1u << 12,
  kTcDiscard = 1u << 13,
  kTcDrvData = 1u << 14,
  kTcFua = 1u << 15,
};
constexpr uint32_t kTcShift = 16;
// Every category: the act_mask of a trace that filters nothing, as the
// kernel's sysfs set-up gives it ((u16)-1).
constexpr uint16_t kAllCategories = 0xffff;
constexpr uint32_t tc_act(uint32_t cat) { return cat << kTcShift; }

// Action codes (enum blktrace_act) with the category the kernel gives each.
enum Action : uint32_t {
  kQueue = 1 | tc_act(kTcQueue),         // Q: a bio entered the queue
  kBackMerge = 2 | tc_act(kTcQueue),     // M
  kFrontMerge = 3 | tc_act(kTcQueue),    // F
  kGetRq = 4 | tc_act(kTcQueue),         // G: a request was allocated
  kSleepRq = 5 | tc_act(kTcQueue),       // S: waited for a tag
  kRequeue = 6 | tc_act(kTcRequeue),     // R
  kIssue = 7 | tc_act(kTcIssue),         // D: handed to the driver
  kComplete = 8 | tc_act(kTcComplete),   // C
  kPlug = 9 | tc_act(kTcQueue),          // P
  kUnplugIo = 10 | tc_act(kTcQueue),     // U: payload = depth (be64)
  kUnplugTimer = 11 | tc_act(kTcQueue),  // UT
  kInsert = 12 | tc_act(kTcQueue),       // I
  kSplit = 13 | tc_act(kTcQueue),        // X: payload = new sector (be64)
};
// Notify records (BLK_TN_*): payload = the thread's name for kProcess.
constexpr uint32_t kNotifyProcess = 0 | tc_act(kTcNotify);
constexpr unsigned kCommLen = 16;  // TASK_COMM_LEN

// The category bits of an I/O as the kernel's __blk_add_trace adds them:
// direction (the kernel's op parity: writes, discards and zeroing write; an
// empty flush, op 2, does not, so blkparse shows it as FN), REQ_SYNC, FUA,
// flush (a preflush or an empty flush), discard. The caller adds FS for a
// request from a bio (blk_add_trace_rq) or PC for a passthrough one.
constexpr uint32_t io_categories(ReqOp op, uint32_t bio_flags) {
  const bool write = op == ReqOp::write || op == ReqOp::discard || op == ReqOp::write_zeroes;
  uint32_t c = write ? kTcWrite : kTcRead;
  if (bio_flags & kBioSync) c |= kTcSync;
  if (bio_flags & kBioFua) c |= kTcFua;
  if ((bio_flags & kBioPreflush) || op == ReqOp::flush) c |= kTcFlush;
  if (op == ReqOp::discard) c |= kTcDiscard;
  return tc_act(c);
}

// The kernel's dev_t layout (MINORBITS = 20), which blkparse prints as
// "major,minor".
constexpr uint32_t make_dev(uint32_t major, uint32_t minor) { return major << 20 | (minor & 0xfffff); }

}  // namespace blkmq::blktrace

#include "nbd/protocol.h"

#include "nbd/wire.h"

namespace blkmq::nbd {
namespace {

// Flags each command accepts. FUA is accepted on every command once
// SEND_FUA is advertised (the spec), and is meaningful on writes.
uint16_t allowed_flags(uint16_t type) {
  switch (type) {
    case kCmdRead: return kCmdFlagFua | kCmdFlagDf;
    case kCmdWriteZeroes: return kCmdFlagFua | kCmdFlagNoHole | kCmdFlagFastZero;
    case kCmdBlockStatus: return kCmdFlagFua | kCmdFlagReqOne;
    default: return kCmdFlagFua;
  }
}

bool aligned(uint64_t v, uint32_t block) { return block <= 1 || v % block == 0; }

// Range checks: reads, trims and block status past the end are EINVAL,
// writes and zeroes ENOSPC (the spec's split).
uint32_t range_error(const Request& r, const ExportLimits& lim) {
  const bool fits = r.offset <= lim.size && r.length <= lim.size - r.offset;
  if (fits) return 0;
  return (r.type == kCmdWrite || r.type == kCmdWriteZeroes) ? kErrNoSpc : kErrInval;
}

}  // namespace

bool parse_request(std::string_view h, Request* out) {
  if (h.size() != kRequestSize || get32(h.data()) != kRequestMagic) return false;
  out->flags = get16(h.data() + 4);
  out->type = get16(h.data() + 6);
  out->cookie = get64(h.data() + 8);
  out->offset = get64(h.data() + 16);
  out->length = get32(h.data() + 24);
  return true;
}

std::string encode_request(const Request& r) {
  std::string s;
  put32(&s, kRequestMagic);
  put16(&s, r.flags);
  put16(&s, r.type);
  put64(&s, r.cookie);
  put64(&s, r.offset);
  put32(&s, r.length);
  return s;
}

uint32_t validate_request(const Request& r, const ExportLimits& lim) {
  if (r.type > kCmdBlockStatus) return kErrInval;
  if (lim.shutting_down && r.type != kCmdDisc) return kErrShutdown;
  if (r.flags & ~allowed_flags(r.type)) return kErrInval;
  if ((r.flags & kCmdFlagDf) && !lim.structured) return kErrInval;
  if ((r.flags & kCmdFlagFastZero) && !lim.fast_zero) return kErrInval;
  switch (r.type) {
    case kCmdDisc:
      return 0;  // the connection ends either way
    case kCmdFlush:
      return (r.offset || r.length) ? uint32_t{kErrInval} : 0u;
    case kCmdBlockStatus:
      if (!lim.meta_context) return kErrInval;
      break;
    default:
      break;
  }
  if ((r.type == kCmdTrim && !lim.trim) || (r.type == kCmdWriteZeroes && !lim.write_zeroes)) return kErrInval;
  if (lim.read_only && (r.type == kCmdWrite || r.type == kCmdTrim || r.type == kCmdWriteZeroes)) return kErrPerm;
  if (r.length == 0) return kErrInval;  // unspecified by the spec; nbdkit answers EINVAL too
  if ((r.type == kCmdRead || r.type == kCmdWrite) && r.length > lim.max_payload) return kErrOverflow;
  if (!aligned(r.offset, lim.min_block) || !aligned(r.length, lim.min_block)) return kErrInval;
  return range_error(r, lim);
}

std::string simple_reply(uint64_t cookie, uint32_t error) {
  std::string s;
  put32(&s, kSimpleReplyMagic);
  put32(&s, error);
  put64(&s, cookie);
  return s;
}

std::string chunk_header(uint64_t cookie, uint16_t type, uint16_t flags, uint32_t length) {
  std::string s;
  put32(&s, kStructuredReplyMagic);
  put16(&s, flags);
  put16(&s, type);
  put64(&s, cookie);
  put32(&s, length);
  return s;
}

std::string offset_data_chunk(uint64_t cookie, uint64_t offset, uint32_t data_len, bool done) {
  std::string s = chunk_header(cookie, kChunkOffsetData, done ? kChunkFlagDone : 0, 8 + data_len);
  put64(&s, offset);
  return s;
}

std::string offset_hole_chunk(uint64_t cookie, uint64_t offset, uint32_t hole_len, bool done) {
  std::string s = chunk_header(cookie, kChunkOffsetHole, done ? kChunkFlagDone : 0, 12);
  put64(&s, offset);
  put32(&s, hole_len);
  return s;
}

std::string block_status_chunk(uint64_t cookie, uint32_t context_id, const std::vector<BlockDescriptor>& descs,
                               bool done) {
  const auto len = static_cast<uint32_t>(4 + 8 * descs.size());
  std::string s = chunk_header(cookie, kChunkBlockStatus, done ? kChunkFlagDone : 0, len);
  s.reserve(kChunkHeaderSize + len);
  put32(&s, context_id);
  for (const BlockDescriptor& d : descs) {
    put32(&s, d.length);
    put32(&s, d.flags);
  }
  return s;
}

std::string error_chunk(uint64_t cookie, uint32_t error, std::string_view message, bool done) {
  // The message length is a u16; a longer message is cut (it is advisory).
  const std::string_view msg = message.substr(0, 4096);
  std::string s = chunk_header(cookie, kChunkError, done ? kChunkFlagDone : 0, static_cast<uint32_t>(6 + msg.size()));
  put32(&s, error);
  put16(&s, static_cast<uint16_t>(msg.size()));
  s.append(msg);
  return s;
}

std::string done_chunk(uint64_t cookie) { return chunk_header(cookie, kChunkNone, kChunkFlagDone, 0); }

const char* cmd_name(uint16_t type) {
  static const char* const kNames[] = {"READ", "WRITE", "DISC", "FLUSH", "TRIM", "CACHE", "WRITE_ZEROES",
                                       "BLOCK_STATUS"};
  return type <= kCmdBlockStatus ? kNames[type] : "UNKNOWN";
}

}  // namespace blkmq::nbd

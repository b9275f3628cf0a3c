// libFuzzer target for the NBD codec: the fixed-newstyle handshake state
// machine and the transmission request parser/validator, the two places
// where a stranger's bytes are decoded before any export is chosen.
//
// Input layout: byte 0 picks the server configuration (TLS mode, shutdown,
// exports, limits), byte 1 seeds how the stream is cut into pieces (the I/O
// loop sees arbitrary read boundaries, so the parser must not care), and the
// rest is what a client sends after the greeting. Once the handshake reaches
// transmission, the remaining bytes are parsed as request headers.
//
// Every check aborts, so libFuzzer reports it as a crash with the input.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "nbd/handshake.h"
#include "nbd/protocol.h"
#include "nbd/wire.h"

namespace blkmq::nbd {
namespace {

#define FUZZ_CHECK(cond)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                            \
    }                                                                          \
  } while (0)

constexpr uint64_t kDiskSize = 64ull << 20;
constexpr uint64_t kSmallSize = 12345;  // not a block multiple: range checks at an odd end

HandshakeConfig make_config(uint8_t c) {
  HandshakeConfig cfg;
  static constexpr TlsMode kModes[] = {TlsMode::off, TlsMode::on, TlsMode::require, TlsMode::off};
  cfg.tls = kModes[c & 3];
  cfg.shutting_down = (c & 4) && (c & 8);  // rarer: it short-cuts every option
  ExportDef a;
  a.name = "disk";
  a.description = "fuzzed export";
  a.size = kDiskSize;
  a.min_block = (c & 16) ? 512 : 1;
  a.tx_flags = kTxSendFlush | kTxSendFua | kTxSendTrim | kTxSendWriteZeroes | kTxSendFastZero;
  if (c & 32) a.tx_flags |= kTxReadOnly;
  a.base_allocation = c & 64;
  cfg.exports.push_back(a);
  if (c & 128) {
    ExportDef b;
    b.name = "";  // an empty name is legal and also the default export's request
    b.size = kSmallSize;
    b.tx_flags = kTxSendFlush;
    cfg.exports.push_back(b);
  }
  return cfg;
}

// Piece sizes from a tiny PRNG: mostly short pieces (headers split across
// reads), now and then a long one. Seed 0 feeds everything at once.
class Splitter {
 public:
  explicit Splitter(uint8_t seed) : x_(seed * 2654435761u + 1), whole_(seed == 0) {}
  size_t next(size_t left) {
    if (whole_) return left;
    x_ ^= x_ << 13;
    x_ ^= x_ >> 17;
    x_ ^= x_ << 5;
    const size_t n = (x_ >> 8) % 8 == 0 ? 1 + x_ % 4096 : 1 + x_ % 24;
    return n < left ? n : left;
  }

 private:
  uint32_t x_;
  bool whole_;
};

bool known_reply_type(uint32_t t) {
  switch (t) {
    case kRepAck: case kRepServer: case kRepInfo: case kRepMetaContext:
    case kRepErrUnsup: case kRepErrPolicy: case kRepErrInvalid: case kRepErrPlatform:
    case kRepErrTlsReqd: case kRepErrUnknown: case kRepErrShutdown: case kRepErrBlockSizeReqd:
    case kRepErrTooBig:
      return true;
    default:
      return false;
  }
}

// The body of one option reply, as its type defines it.
void check_reply_body(uint32_t type, std::string_view d, const HandshakeConfig& cfg) {
  if (type == kRepAck) FUZZ_CHECK(d.empty());
  if (type == kRepServer) FUZZ_CHECK(d.size() >= 4 && get32(d.data()) <= d.size() - 4);
  if (type == kRepMetaContext) FUZZ_CHECK(d.size() > 4);  // context id, then a non-empty name
  if (type == kRepInfo) {
    FUZZ_CHECK(d.size() >= 2);
    const uint16_t info = get16(d.data());
    if (info == kInfoExport) FUZZ_CHECK(d.size() == 12 && (get16(d.data() + 10) & kTxHasFlags));
    if (info == kInfoBlockSize) FUZZ_CHECK(d.size() == 14);
  }
  // The spec: a server without TLS never sends ERR_TLS_REQD.
  if (cfg.tls != TlsMode::require) FUZZ_CHECK(type != kRepErrTlsReqd);
  if (cfg.shutting_down) FUZZ_CHECK(type == kRepErrShutdown || type == kRepErrTooBig);
}

// EXPORT_NAME's answer has no reply header: size, flags, 124 zeroes unless
// NO_ZEROES was agreed. It can only end the output that entered transmission.
bool is_export_name_answer(std::string_view s, const Handshake& h) {
  if (h.state() != Handshake::State::transmission) return false;
  if (s.size() != (h.no_zeroes() ? 10u : 134u)) return false;
  FUZZ_CHECK(get64(s.data()) == h.selected()->size && get16(s.data() + 8) == h.tx_flags());
  FUZZ_CHECK(s.substr(10).find_first_not_of('\0') == std::string_view::npos);
  return true;
}

// What one consume() call appended: whole, well-formed option replies.
// Returns the type of the last reply (0 if none).
uint32_t check_replies(std::string_view s, const Handshake& h, const HandshakeConfig& cfg) {
  uint32_t last = 0;
  while (!s.empty()) {
    if (is_export_name_answer(s, h)) return last;
    FUZZ_CHECK(s.size() >= 20 && get64(s.data()) == kRepMagic);
    const uint32_t type = get32(s.data() + 12);
    const uint32_t len = get32(s.data() + 16);
    FUZZ_CHECK(known_reply_type(type));
    FUZZ_CHECK(len <= s.size() - 20);
    check_reply_body(type, s.substr(20, len), cfg);
    s.remove_prefix(20 + len);
    last = type;
  }
  return last;
}

// consume() takes every whole message: what it leaves in the options state
// must be the start of one that has not fully arrived.
void check_leftover(std::string_view rest, const Handshake& h) {
  if (h.state() == Handshake::State::client_flags) FUZZ_CHECK(rest.size() < 4);
  if (h.state() != Handshake::State::options || rest.size() < 16) return;
  const uint32_t len = get32(rest.data() + 12);
  FUZZ_CHECK(get64(rest.data()) == kOptMagic);
  FUZZ_CHECK(len <= kMaxOptionLength && rest.size() < 16 + static_cast<size_t>(len));
}

void check_state(const Handshake& h, const HandshakeConfig& cfg) {
  if (h.state() != Handshake::State::transmission) return;
  FUZZ_CHECK(h.selected() != nullptr);
  FUZZ_CHECK(h.tx_flags() & kTxHasFlags);
  if (!h.structured()) FUZZ_CHECK(!(h.tx_flags() & kTxSendDf));
  if (cfg.tls == TlsMode::require) FUZZ_CHECK(h.tls_active());
  FUZZ_CHECK(!cfg.shutting_down);
}

// Runs the handshake over `stream`; returns where transmission starts in it,
// or npos if the connection never got there.
size_t run_handshake(std::string_view stream, Handshake& h, const HandshakeConfig& cfg, Splitter& split) {
  std::string buf;
  size_t pos = 0;
  for (;;) {
    const size_t n = split.next(stream.size() - pos);
    buf.append(stream.substr(pos, n));
    pos += n;
    std::string out;
    const size_t used = h.consume(buf, &out);
    FUZZ_CHECK(used <= buf.size());
    const uint32_t last = check_replies(out, h, cfg);
    buf.erase(0, used);
    check_leftover(buf, h);
    check_state(h, cfg);
    if (h.state() == Handshake::State::start_tls) {
      FUZZ_CHECK(last == kRepAck && cfg.tls != TlsMode::off);
      h.tls_started();  // what follows stands for the bytes inside TLS
      FUZZ_CHECK(h.state() == Handshake::State::options && h.tls_active());
      continue;
    }
    if (h.state() == Handshake::State::closed) {
      FUZZ_CHECK(!h.close_reason().empty());
      std::string more;
      FUZZ_CHECK(h.consume(std::string_view("\0\0\0\0", 4), &more) == 0 && more.empty());
      return std::string_view::npos;
    }
    if (h.state() == Handshake::State::transmission) return pos - buf.size();
    if (pos == stream.size()) return std::string_view::npos;
  }
}

ExportLimits limits_of(const Handshake& h, uint8_t c) {
  ExportLimits lim;
  lim.size = h.selected()->size;
  lim.min_block = h.selected()->min_block;
  lim.read_only = h.tx_flags() & kTxReadOnly;
  lim.structured = h.structured();
  lim.meta_context = h.base_allocation();
  lim.trim = h.tx_flags() & kTxSendTrim;
  lim.write_zeroes = h.tx_flags() & kTxSendWriteZeroes;
  lim.fast_zero = h.tx_flags() & kTxSendFastZero;
  lim.shutting_down = c & 4;  // a shutdown that began after the handshake
  return lim;
}

// An accepted request really is servable; a refused one gets a spec error.
void check_verdict(const Request& r, const ExportLimits& lim, uint32_t err) {
  FUZZ_CHECK(err == 0 || err == kErrPerm || err == kErrInval || err == kErrNoSpc || err == kErrOverflow ||
             err == kErrShutdown);
  // An unknown command stays EINVAL during a shutdown: it was never servable.
  if (lim.shutting_down && r.type != kCmdDisc && r.type <= kCmdBlockStatus) FUZZ_CHECK(err == kErrShutdown);
  if (err != 0 || r.type == kCmdDisc) return;
  FUZZ_CHECK(r.type <= kCmdBlockStatus);
  if (r.type == kCmdFlush) {
    FUZZ_CHECK(r.offset == 0 && r.length == 0);
    return;
  }
  FUZZ_CHECK(r.length > 0 && r.offset <= lim.size && r.length <= lim.size - r.offset);
  FUZZ_CHECK(lim.min_block <= 1 || (r.offset % lim.min_block == 0 && r.length % lim.min_block == 0));
  if (r.type == kCmdRead || r.type == kCmdWrite) FUZZ_CHECK(r.length <= lim.max_payload);
  if (lim.read_only) FUZZ_CHECK(r.type != kCmdWrite && r.type != kCmdTrim && r.type != kCmdWriteZeroes);
  if (r.flags & kCmdFlagDf) FUZZ_CHECK(lim.structured && r.type == kCmdRead);
  if (r.type == kCmdBlockStatus) FUZZ_CHECK(lim.meta_context);
}

// The reply encoders the server answers a refused request with.
void check_error_replies(const Request& r, uint32_t err, std::string_view msg) {
  const std::string simple = simple_reply(r.cookie, err);
  FUZZ_CHECK(simple.size() == kSimpleReplySize && get32(simple.data()) == kSimpleReplyMagic &&
             get32(simple.data() + 4) == err && get64(simple.data() + 8) == r.cookie);
  const std::string chunk = error_chunk(r.cookie, err, msg);
  FUZZ_CHECK(chunk.size() >= kChunkHeaderSize + 6 && get32(chunk.data()) == kStructuredReplyMagic);
  FUZZ_CHECK(get32(chunk.data() + 16) == chunk.size() - kChunkHeaderSize);
  FUZZ_CHECK(get16(chunk.data() + 24) == chunk.size() - kChunkHeaderSize - 6);
}

// The chunk headers a served READ is answered with: lengths that cover
// exactly what follows them.
void check_read_replies(const Request& r) {
  const std::string data = offset_data_chunk(r.cookie, r.offset, r.length, true);
  FUZZ_CHECK(data.size() == kChunkHeaderSize + 8 && get32(data.data() + 16) == 8ull + r.length);
  FUZZ_CHECK(get64(data.data() + kChunkHeaderSize) == r.offset && (get16(data.data() + 4) & kChunkFlagDone));
  const std::string hole = offset_hole_chunk(r.cookie, r.offset, r.length, false);
  FUZZ_CHECK(hole.size() == kChunkHeaderSize + 12 && get32(hole.data() + 16) == 12);
  FUZZ_CHECK(done_chunk(r.cookie).size() == kChunkHeaderSize);
}

void run_transmission(std::string_view s, const Handshake& h, uint8_t c) {
  const ExportLimits lim = limits_of(h, c);
  while (s.size() >= kRequestSize) {
    Request r;
    if (!parse_request(s.substr(0, kRequestSize), &r)) return;  // the server closes on a bad magic
    FUZZ_CHECK(encode_request(r) == s.substr(0, kRequestSize));
    const uint32_t err = validate_request(r, lim);
    check_verdict(r, lim, err);
    s.remove_prefix(kRequestSize);
    FUZZ_CHECK(cmd_name(r.type) != nullptr);
    if (err != 0) check_error_replies(r, err, s.substr(0, 64));
    if (err == 0 && r.type == kCmdRead) check_read_replies(r);
    if (r.type == kCmdDisc) return;
    // A WRITE's payload is on the wire whatever the verdict.
    const uint64_t skip = request_payload(r);
    if (skip > s.size()) return;
    s.remove_prefix(static_cast<size_t>(skip));
  }
}

}  // namespace
}  // namespace blkmq::nbd

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace blkmq::nbd;
  if (size < 2) return 0;
  const uint8_t conf = data[0];
  const HandshakeConfig cfg = make_config(conf);
  Splitter split(data[1]);
  const std::string_view stream(reinterpret_cast<const char*>(data) + 2, size - 2);
  Handshake h(cfg);
  const size_t tx = run_handshake(stream, h, cfg, split);
  if (tx != std::string_view::npos) run_transmission(stream.substr(tx), h, conf);
  return 0;
}

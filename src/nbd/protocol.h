// The NBD protocol's numbers and its transmission-phase messages: request
// headers in, simple and structured replies out, and the spec's error for
// every bad request. Pure functions, no sockets: the server's I/O loop and
// the fuzzer drive them. The authority is the NBD specification
// (NetworkBlockDevice/nbd doc/proto.md); shared/reference/nbd-protocol.md is
// the checklist.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace blkmq::nbd {

// Handshake.
inline constexpr uint64_t kNbdMagic = 0x4e42444d41474943ull;  // "NBDMAGIC"
inline constexpr uint64_t kOptMagic = 0x49484156454F5054ull;  // "IHAVEOPT"
inline constexpr uint64_t kRepMagic = 0x0003e889045565a9ull;
inline constexpr uint16_t kFlagFixedNewstyle = 1 << 0;
inline constexpr uint16_t kFlagNoZeroes = 1 << 1;
inline constexpr uint32_t kClientFixedNewstyle = 1 << 0;
inline constexpr uint32_t kClientNoZeroes = 1 << 1;

enum Opt : uint32_t {
  kOptExportName = 1,
  kOptAbort = 2,
  kOptList = 3,
  kOptStartTls = 5,
  kOptInfo = 6,
  kOptGo = 7,
  kOptStructuredReply = 8,
  kOptListMetaContext = 9,
  kOptSetMetaContext = 10,
};

inline constexpr uint32_t kRepErrBit = 1u << 31;
enum Rep : uint32_t {
  kRepAck = 1,
  kRepServer = 2,
  kRepInfo = 3,
  kRepMetaContext = 4,
  kRepErrUnsup = kRepErrBit | 1,
  kRepErrPolicy = kRepErrBit | 2,
  kRepErrInvalid = kRepErrBit | 3,
  kRepErrPlatform = kRepErrBit | 4,
  kRepErrTlsReqd = kRepErrBit | 5,
  kRepErrUnknown = kRepErrBit | 6,
  kRepErrShutdown = kRepErrBit | 7,
  kRepErrBlockSizeReqd = kRepErrBit | 8,
  kRepErrTooBig = kRepErrBit | 9,
};

enum Info : uint16_t { kInfoExport = 0, kInfoName = 1, kInfoDescription = 2, kInfoBlockSize = 3 };

// Transmission flags.
enum TxFlag : uint16_t {
  kTxHasFlags = 1 << 0,
  kTxReadOnly = 1 << 1,
  kTxSendFlush = 1 << 2,
  kTxSendFua = 1 << 3,
  kTxRotational = 1 << 4,
  kTxSendTrim = 1 << 5,
  kTxSendWriteZeroes = 1 << 6,
  kTxSendDf = 1 << 7,
  kTxCanMultiConn = 1 << 8,
  kTxSendCache = 1 << 10,
  kTxSendFastZero = 1 << 11,
};

// Transmission.
inline constexpr uint32_t kRequestMagic = 0x25609513;
inline constexpr uint32_t kSimpleReplyMagic = 0x67446698;
inline constexpr uint32_t kStructuredReplyMagic = 0x668e33ef;
inline constexpr size_t kRequestSize = 28;
inline constexpr size_t kSimpleReplySize = 16;
inline constexpr size_t kChunkHeaderSize = 20;

enum Cmd : uint16_t {
  kCmdRead = 0,
  kCmdWrite = 1,
  kCmdDisc = 2,
  kCmdFlush = 3,
  kCmdTrim = 4,
  kCmdCache = 5,
  kCmdWriteZeroes = 6,
  kCmdBlockStatus = 7,
};

enum CmdFlag : uint16_t {
  kCmdFlagFua = 1 << 0,
  kCmdFlagNoHole = 1 << 1,
  kCmdFlagDf = 1 << 2,
  kCmdFlagReqOne = 1 << 3,
  kCmdFlagFastZero = 1 << 4,
};

enum ChunkType : uint16_t {
  kChunkNone = 0,
  kChunkOffsetData = 1,
  kChunkOffsetHole = 2,
  kChunkBlockStatus = 5,
  kChunkError = 32769,
  kChunkErrorOffset = 32770,
};
inline constexpr uint16_t kChunkFlagDone = 1;

// base:allocation extent flags.
inline constexpr uint32_t kStateHole = 1;
inline constexpr uint32_t kStateZero = 2;

// The errors the spec lets a server send (errno values on the wire).
enum Err : uint32_t {
  kErrPerm = 1,
  kErrIo = 5,
  kErrNoMem = 12,
  kErrInval = 22,
  kErrNoSpc = 28,
  kErrOverflow = 75,
  kErrNotSup = 95,
  kErrShutdown = 108,
};

// The largest payload a request may carry (WRITE data, READ length): the
// spec's 32 MiB that a server must never treat as abuse. Longer payloads are
// refused; TRIM and WRITE_ZEROES carry none and may be longer.
inline constexpr uint32_t kMaxPayload = 32u << 20;

// One request header (28 bytes on the wire; WRITE data follows).
struct Request {
  uint16_t flags = 0;
  uint16_t type = 0;
  uint64_t cookie = 0;
  uint64_t offset = 0;
  uint32_t length = 0;
};

// Decodes a header from exactly kRequestSize bytes. False on a bad magic,
// after which the connection cannot stay in sync and must close.
bool parse_request(std::string_view header, Request* out);
// Encodes a header (clients and tests).
std::string encode_request(const Request& r);

// What an export and a connection allow: the facts validate_request checks.
struct ExportLimits {
  uint64_t size = 0;
  uint32_t min_block = 1;        // advertised minimum block: offsets and lengths must be multiples
  uint32_t max_payload = kMaxPayload;
  bool read_only = false;
  bool structured = false;       // structured replies agreed (DF allowed)
  bool meta_context = false;     // a meta context is selected (BLOCK_STATUS allowed)
  bool fast_zero = true;         // SEND_FAST_ZERO advertised
  bool trim = true;              // SEND_TRIM advertised
  bool write_zeroes = true;      // SEND_WRITE_ZEROES advertised
  bool shutting_down = false;
};

// The spec's error for a request, or 0 if it may be served: unknown command
// or flag, a flag not valid for the command, misalignment, out of range,
// read-only, oversized payloads, DISC with a range, after shutdown. A WRITE
// whose payload is refused still has its payload on the wire: the caller
// must read and drop it (payload_to_skip) before the next header.
uint32_t validate_request(const Request& r, const ExportLimits& lim);

// Bytes of payload a request header announces (WRITE's length; 0 else).
inline uint64_t request_payload(const Request& r) { return r.type == kCmdWrite ? r.length : 0; }

// Replies. A simple reply header is followed by the data of a successful
// READ only. Structured chunks: a header, then the payload the type defines.
std::string simple_reply(uint64_t cookie, uint32_t error);
std::string chunk_header(uint64_t cookie, uint16_t type, uint16_t flags, uint32_t length);
// An OFFSET_DATA chunk's header and its 8-byte offset; `data_len` bytes of
// data must follow.
std::string offset_data_chunk(uint64_t cookie, uint64_t offset, uint32_t data_len, bool done);
std::string offset_hole_chunk(uint64_t cookie, uint64_t offset, uint32_t hole_len, bool done);
// One BLOCK_STATUS descriptor: a run of `length` bytes in one state
// (for base:allocation, kStateHole / kStateZero bits).
struct BlockDescriptor {
  uint32_t length = 0;
  uint32_t flags = 0;
};
// A BLOCK_STATUS chunk for one meta context: the context id, then the
// descriptors in order. The caller keeps them non-empty, non-zero and
// inside the request (the spec's rules).
std::string block_status_chunk(uint64_t cookie, uint32_t context_id, const std::vector<BlockDescriptor>& descs,
                               bool done);
std::string error_chunk(uint64_t cookie, uint32_t error, std::string_view message, bool done = true);
std::string done_chunk(uint64_t cookie);

// The name of a command or a reply type, for logs and errors.
const char* cmd_name(uint16_t type);

}  // namespace blkmq::nbd

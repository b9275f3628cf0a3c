#include "nbd/handshake.h"

#include <algorithm>

#include "nbd/wire.h"

namespace blkmq::nbd {
namespace {

constexpr size_t kOptHeader = 16;  // IHAVEOPT, option, length
constexpr std::string_view kBaseAllocation = "base:allocation";

bool allowed_before_tls(uint32_t opt) { return opt == kOptStartTls || opt == kOptAbort; }

}  // namespace

void option_reply(std::string* out, uint32_t opt, uint32_t type, std::string_view data) {
  put64(out, kRepMagic);
  put32(out, opt);
  put32(out, type);
  put32(out, static_cast<uint32_t>(data.size()));
  out->append(data);
}

std::string Handshake::greeting() {
  std::string s;
  put64(&s, kNbdMagic);
  put64(&s, kOptMagic);
  put16(&s, kFlagFixedNewstyle | kFlagNoZeroes);
  return s;
}

void Handshake::close(std::string why) {
  state_ = State::closed;
  reason_ = std::move(why);
}

size_t Handshake::consume(std::string_view in, std::string* out) {
  size_t used = 0;
  while (state_ == State::client_flags || state_ == State::options) {
    const size_t n = state_ == State::client_flags ? consume_flags(in.substr(used)) : consume_option(in.substr(used), out);
    if (n == 0) break;
    used += n;
  }
  return used;
}

// What was agreed in plaintext is forgotten: a man in the middle could have
// injected it (nbdkit's CVE-2021-3716 was a STRUCTURED_REPLY kept across
// STARTTLS), so the client negotiates again inside TLS.
void Handshake::tls_started() {
  if (state_ != State::start_tls) return;
  tls_active_ = true;
  structured_ = false;
  meta_set_ = false;
  meta_export_.clear();
  state_ = State::options;
}

size_t Handshake::consume_flags(std::string_view in) {
  if (in.size() < 4) return 0;
  const uint32_t f = get32(in.data());
  // The spec: an unknown client flag means the server must drop the connection.
  if (f & ~(kClientFixedNewstyle | kClientNoZeroes)) {
    close("unknown client flags");
    return 4;
  }
  no_zeroes_ = f & kClientNoZeroes;
  state_ = State::options;
  return 4;
}

size_t Handshake::consume_option(std::string_view in, std::string* out) {
  if (skip_left_ > 0) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(skip_left_, in.size()));
    skip_left_ -= n;
    if (skip_left_ == 0) option_reply(out, skip_opt_, kRepErrTooBig, "option too long");
    return n;
  }
  if (in.size() < kOptHeader) return 0;
  if (get64(in.data()) != kOptMagic) {
    close("bad option magic");
    return in.size();
  }
  const uint32_t opt = get32(in.data() + 8);
  const uint32_t len = get32(in.data() + 12);
  if (len > kMaxOptionLength) {
    if (opt == kOptExportName) {  // no error reply exists for it
      close("EXPORT_NAME too long");
      return in.size();
    }
    skip_opt_ = opt;
    skip_left_ = len;
    return kOptHeader;
  }
  if (in.size() < kOptHeader + len) return 0;
  handle(opt, in.substr(kOptHeader, len), out);
  return kOptHeader + len;
}

void Handshake::handle(uint32_t opt, std::string_view data, std::string* out) {
  if (opt == kOptExportName) return export_name(data, out);
  if (cfg_.shutting_down) return option_reply(out, opt, kRepErrShutdown, "server is shutting down");
  if (cfg_.tls == TlsMode::require && !tls_active_ && !allowed_before_tls(opt))
    return option_reply(out, opt, kRepErrTlsReqd, "TLS is required (STARTTLS)");
  switch (opt) {
    case kOptAbort:
      option_reply(out, opt, kRepAck);
      return close("client aborted");
    case kOptList:
      return list(opt, data, out);
    case kOptStartTls:
      if (cfg_.tls == TlsMode::off) return option_reply(out, opt, kRepErrUnsup, "TLS is not configured");
      if (tls_active_ || !data.empty()) return option_reply(out, opt, kRepErrInvalid, "STARTTLS: TLS is already on or data was sent");
      option_reply(out, opt, kRepAck);
      state_ = State::start_tls;
      return;
    case kOptInfo:
    case kOptGo:
      return info_or_go(opt, data, out);
    case kOptStructuredReply:
      if (structured_ || !data.empty())
        return option_reply(out, opt, kRepErrInvalid, "STRUCTURED_REPLY: repeated or with data");
      structured_ = true;
      return option_reply(out, opt, kRepAck);
    case kOptListMetaContext:
    case kOptSetMetaContext:
      return meta_context(opt, data, out);
    default:
      return option_reply(out, opt, kRepErrUnsup, "unknown option");
  }
}

const ExportDef* Handshake::find(std::string_view name) const {
  if (cfg_.exports.empty()) return nullptr;
  if (name.empty()) return &cfg_.exports.front();
  for (const ExportDef& e : cfg_.exports)
    if (e.name == name) return &e;
  return nullptr;
}

uint16_t Handshake::flags_for(const ExportDef& e) const {
  uint16_t f = static_cast<uint16_t>(kTxHasFlags | e.tx_flags);
  if (structured_) f |= kTxSendDf;
  return f;
}

void Handshake::export_name(std::string_view name, std::string* out) {
  // EXPORT_NAME has no error reply: anything wrong closes the connection.
  const ExportDef* e = find(name);
  if (cfg_.shutting_down) return close("EXPORT_NAME while shutting down");
  if (cfg_.tls == TlsMode::require && !tls_active_) return close("EXPORT_NAME before STARTTLS with TLS required");
  if (e == nullptr) return close("EXPORT_NAME: no export '" + std::string(name) + "'");
  // DF needs structured replies, which EXPORT_NAME clients cannot rely on
  // being used; the spec allows it only after STRUCTURED_REPLY, as flags_for does.
  sent_flags_ = flags_for(*e);
  put64(out, e->size);
  put16(out, sent_flags_);
  if (!no_zeroes_) out->append(124, '\0');
  selected_ = e;
  state_ = State::transmission;
}

void Handshake::info_or_go(uint32_t opt, std::string_view data, std::string* out) {
  Reader r(data);
  const uint32_t name_len = r.u32();
  const std::string_view name = r.bytes(name_len);
  const uint16_t count = r.u16();
  std::vector<uint16_t> asked;
  for (uint16_t i = 0; i < count && !r.failed(); i++) asked.push_back(r.u16());
  if (r.failed() || r.left() != 0) return option_reply(out, opt, kRepErrInvalid, "INFO/GO: lengths do not add up");
  const ExportDef* e = find(name);
  if (e == nullptr) return option_reply(out, opt, kRepErrUnknown, "no such export");
  const uint16_t flags = flags_for(*e);
  std::string info;
  put16(&info, kInfoExport);
  put64(&info, e->size);
  put16(&info, flags);
  option_reply(out, opt, kRepInfo, info);
  for (uint16_t want : asked) {
    info.clear();
    put16(&info, want);
    if (want == kInfoName) {
      info.append(e->name);
    } else if (want == kInfoDescription) {
      info.append(e->description);
    } else if (want == kInfoBlockSize) {
      put32(&info, e->min_block);
      put32(&info, e->pref_block);
      put32(&info, e->max_block);
    } else {
      continue;  // the spec: ignore info requests the server does not know
    }
    option_reply(out, opt, kRepInfo, info);
  }
  option_reply(out, opt, kRepAck);
  if (opt == kOptGo) {
    block_size_agreed_ = std::find(asked.begin(), asked.end(), uint16_t{kInfoBlockSize}) != asked.end();
    selected_ = e;
    sent_flags_ = flags;
    state_ = State::transmission;
  }
}

void Handshake::list(uint32_t opt, std::string_view data, std::string* out) {
  if (!data.empty()) return option_reply(out, opt, kRepErrInvalid, "LIST takes no data");
  for (const ExportDef& e : cfg_.exports) {
    std::string s;
    put32(&s, static_cast<uint32_t>(e.name.size()));
    s.append(e.name);
    s.append(e.description);
    option_reply(out, opt, kRepServer, s);
  }
  option_reply(out, opt, kRepAck);
}

// LIST_META_CONTEXT and SET_META_CONTEXT: only base:allocation exists here;
// "base:" lists it; other namespaces are ignored; SET replaces the earlier
// selection even when it fails.
void Handshake::meta_context(uint32_t opt, std::string_view data, std::string* out) {
  const bool set = opt == kOptSetMetaContext;
  if (set) meta_set_ = false;
  if (!structured_) return option_reply(out, opt, kRepErrInvalid, "meta contexts need structured replies");
  Reader r(data);
  const std::string_view name = r.bytes(r.u32());
  const uint32_t count = r.u32();
  std::vector<std::string_view> queries;
  for (uint32_t i = 0; i < count && !r.failed(); i++) queries.push_back(r.bytes(r.u32()));
  if (r.failed() || r.left() != 0) return option_reply(out, opt, kRepErrInvalid, "meta context: lengths do not add up");
  const ExportDef* e = find(name);
  if (e == nullptr) return option_reply(out, opt, kRepErrUnknown, "no such export");
  bool match = !set && queries.empty();  // LIST with no query lists everything
  for (std::string_view q : queries) match |= q == kBaseAllocation || (!set && q == "base:");
  if (match && e->base_allocation) {
    std::string s;
    put32(&s, set ? kBaseAllocationId : 0);
    s.append(kBaseAllocation);
    option_reply(out, opt, kRepMetaContext, s);
    if (set) {
      meta_set_ = true;
      meta_export_ = e->name;
    }
  }
  option_reply(out, opt, kRepAck);
}

}  // namespace blkmq::nbd

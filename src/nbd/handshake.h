// The NBD fixed-newstyle handshake as a pure state machine: bytes from the
// client in, bytes to send out, and the state the I/O loop acts on (run a
// TLS handshake, start transmission, close). No sockets, no clock: the
// server and the fuzzer feed it, and tests step it byte by byte.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "nbd/protocol.h"

namespace blkmq::nbd {

// One export as the handshake advertises it.
struct ExportDef {
  std::string name;         // "" is a valid name; an empty request picks the first export
  std::string description;
  uint64_t size = 0;
  uint32_t min_block = 1;   // NBD_INFO_BLOCK_SIZE: minimum, preferred, maximum payload
  uint32_t pref_block = 4096;
  uint32_t max_block = kMaxPayload;
  // Transmission flags offered (kTx*); HAS_FLAGS is added, and SEND_DF when
  // structured replies were agreed.
  uint16_t tx_flags = 0;
  bool base_allocation = false;  // serves the base:allocation meta context
};

enum class TlsMode : uint8_t { off, on, require };

struct HandshakeConfig {
  std::vector<ExportDef> exports;
  TlsMode tls = TlsMode::off;
  bool shutting_down = false;  // options get ERR_SHUTDOWN
};

// Options longer than this are skipped unread and answered ERR_TOO_BIG, so
// a client cannot make the server buffer an arbitrary amount.
inline constexpr uint32_t kMaxOptionLength = 64 * 1024;

// The id blkmq gives base:allocation in SET_META_CONTEXT replies.
inline constexpr uint32_t kBaseAllocationId = 1;

class Handshake {
 public:
  enum class State : uint8_t {
    client_flags,   // waiting for the client's 32-bit flags
    options,        // option haggling
    start_tls,      // ACKed STARTTLS: the caller runs the TLS handshake, then tls_started()
    transmission,   // GO or EXPORT_NAME done: selected() is the export
    closed,         // drop the connection (close_reason() says why)
  };

  // `cfg` must outlive the handshake. One per connection, one thread.
  explicit Handshake(const HandshakeConfig& cfg) : cfg_(cfg) {}

  // What the server sends first: NBDMAGIC, IHAVEOPT, FIXED_NEWSTYLE|NO_ZEROES.
  static std::string greeting();

  // Consumes every whole message at the front of `in` (and the skipped part
  // of an oversized option), appends the replies to *out and returns the
  // bytes used; the rest must be given again with more data. Stops at
  // start_tls, transmission and closed: bytes after those belong to TLS or
  // to transmission. Cost: linear in the bytes consumed.
  size_t consume(std::string_view in, std::string* out);
  // The TLS session is up (after start_tls): haggling resumes inside it.
  void tls_started();

  State state() const { return state_; }
  const std::string& close_reason() const { return reason_; }
  // Valid in transmission: the export, the flags it was sent with, and what
  // was agreed.
  const ExportDef* selected() const { return selected_; }
  uint16_t tx_flags() const { return sent_flags_; }
  bool structured() const { return structured_; }
  bool no_zeroes() const { return no_zeroes_; }
  bool tls_active() const { return tls_active_; }
  // The client asked for NBD_INFO_BLOCK_SIZE in its GO, and so agreed to
  // the advertised minimum; otherwise (EXPORT_NAME, or GO without it) the
  // spec has the server accept a minimum block size of 1.
  bool block_size_agreed() const { return block_size_agreed_; }
  // base:allocation was set for the export that was selected.
  bool base_allocation() const { return meta_set_ && selected_ && meta_export_ == selected_->name; }

 private:
  size_t consume_flags(std::string_view in);
  size_t consume_option(std::string_view in, std::string* out);
  void handle(uint32_t opt, std::string_view data, std::string* out);
  void export_name(std::string_view name, std::string* out);
  void info_or_go(uint32_t opt, std::string_view data, std::string* out);
  void list(uint32_t opt, std::string_view data, std::string* out);
  void meta_context(uint32_t opt, std::string_view data, std::string* out);
  const ExportDef* find(std::string_view name) const;
  uint16_t flags_for(const ExportDef& e) const;
  void close(std::string why);

  const HandshakeConfig& cfg_;
  State state_ = State::client_flags;
  std::string reason_;
  bool no_zeroes_ = false;
  bool tls_active_ = false;
  bool structured_ = false;
  bool block_size_agreed_ = false;
  bool meta_set_ = false;
  std::string meta_export_;
  const ExportDef* selected_ = nullptr;
  uint16_t sent_flags_ = 0;
  // An oversized option being skipped: its number and the bytes still to drop.
  uint32_t skip_opt_ = 0;
  uint64_t skip_left_ = 0;
};

// Appends one option reply (magic, option, type, length, data).
void option_reply(std::string* out, uint32_t opt, uint32_t type, std::string_view data = {});

}  // namespace blkmq::nbd

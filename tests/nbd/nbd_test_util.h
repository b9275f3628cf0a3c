// Client-side helpers for the NBD codec tests: build options, split the
// server's option replies.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "nbd/handshake.h"
#include "nbd/wire.h"

namespace blkmq::nbd::test {

inline std::string option(uint32_t opt, std::string_view data = {}) {
  std::string s;
  put64(&s, kOptMagic);
  put32(&s, opt);
  put32(&s, static_cast<uint32_t>(data.size()));
  s.append(data);
  return s;
}

// GO/INFO data: name, then the info requests.
inline std::string go_data(std::string_view name, std::vector<uint16_t> infos = {}) {
  std::string s;
  put32(&s, static_cast<uint32_t>(name.size()));
  s.append(name);
  put16(&s, static_cast<uint16_t>(infos.size()));
  for (uint16_t i : infos) put16(&s, i);
  return s;
}

inline std::string meta_data(std::string_view name, std::vector<std::string> queries) {
  std::string s;
  put32(&s, static_cast<uint32_t>(name.size()));
  s.append(name);
  put32(&s, static_cast<uint32_t>(queries.size()));
  for (const std::string& q : queries) {
    put32(&s, static_cast<uint32_t>(q.size()));
    s.append(q);
  }
  return s;
}

inline std::string client_flags(uint32_t f) {
  std::string s;
  put32(&s, f);
  return s;
}

struct OptReply {
  uint32_t opt = 0, type = 0;
  std::string data;
};

// Splits option replies; stops at the first malformed one (and adds a reply
// with type 0 so a test notices).
inline std::vector<OptReply> replies(std::string_view s) {
  std::vector<OptReply> v;
  while (!s.empty()) {
    if (s.size() < 20 || get64(s.data()) != kRepMagic) {
      v.push_back({});
      break;
    }
    const uint32_t len = get32(s.data() + 16);
    if (s.size() < 20 + len) {
      v.push_back({});
      break;
    }
    v.push_back({get32(s.data() + 8), get32(s.data() + 12), std::string(s.substr(20, len))});
    s.remove_prefix(20 + len);
  }
  return v;
}

}  // namespace blkmq::nbd::test

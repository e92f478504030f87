// Helpers shared by the src/wire unit tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "wire/mpa.h"

namespace uiw::wire::test {

// Parses hex digits, ignoring spaces, newlines and '|' separators: "0012 4143" -> {0,0x12,..}.
inline std::vector<uint8_t> from_hex(std::string_view s) {
  std::vector<uint8_t> out;
  int hi = -1;
  for (char c : s) {
    int v;
    if (c >= '0' && c <= '9') {
      v = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      v = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      v = c - 'A' + 10;
    } else {
      continue;
    }
    if (hi < 0) {
      hi = v;
    } else {
      out.push_back(static_cast<uint8_t>(hi << 4 | v));
      hi = -1;
    }
  }
  return out;
}

inline std::string to_hex(std::span<const uint8_t> b) {
  static const char* kDigits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < b.size(); ++i) {
    if (i != 0 && i % 4 == 0) s += ' ';
    s += kDigits[b[i] >> 4];
    s += kDigits[b[i] & 15];
  }
  return s;
}

// Collects every ULPDU an FpduDecoder delivers.
struct CollectingVisitor : FpduDecoder::Visitor {
  std::vector<std::vector<uint8_t>> ulpdus;
  void on_ulpdu(std::span<const uint8_t> u) override { ulpdus.emplace_back(u.begin(), u.end()); }
};

}  // namespace uiw::wire::test

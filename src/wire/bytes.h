// Byte-order helpers and bounds-checked cursors for the uiw wire codecs.
//
// Every multi-octet iWARP header field is big-endian (RFC 5040 §4, RFC 5041 §4, RFC 5044 §4.1);
// the one exception is the MPA CRC32c, which goes on the wire least-significant octet first
// (RFC 5044 §4.4, Figures 5 and 6), hence load_le32/store_le32.
// Layouts are built with these helpers, never with packed structs or bitfields, whose layout,
// byte order and alignment are the compiler's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace uiw::wire {

inline uint16_t load_be16(const uint8_t* p) {
  return static_cast<uint16_t>((uint16_t{p[0]} << 8) | uint16_t{p[1]});
}
inline uint32_t load_be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}
inline uint64_t load_be64(const uint8_t* p) {
  return (uint64_t{load_be32(p)} << 32) | uint64_t{load_be32(p + 4)};
}
inline uint32_t load_le32(const uint8_t* p) {
  return uint32_t{p[0]} | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
}

inline void store_be16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
inline void store_be32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}
inline void store_be64(uint8_t* p, uint64_t v) {
  store_be32(p, static_cast<uint32_t>(v >> 32));
  store_be32(p + 4, static_cast<uint32_t>(v));
}
inline void store_le32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
  p[2] = static_cast<uint8_t>(v >> 16);
  p[3] = static_cast<uint8_t>(v >> 24);
}

// Bounds-checked big-endian read cursor over a caller-owned buffer (QUICHE QuicheDataReader
// style). Reads advance only on success; a failed read leaves the cursor where it was.
// The span must outlive the Reader. Not thread-safe.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> in) : in_(in) {}
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  bool read_u8(uint8_t* v) {
    if (remaining() < 1) return false;
    *v = in_[pos_];
    pos_ += 1;
    return true;
  }
  bool read_u16(uint16_t* v) {
    if (remaining() < 2) return false;
    *v = load_be16(in_.data() + pos_);
    pos_ += 2;
    return true;
  }
  bool read_u32(uint32_t* v) {
    if (remaining() < 4) return false;
    *v = load_be32(in_.data() + pos_);
    pos_ += 4;
    return true;
  }
  bool read_u64(uint64_t* v) {
    if (remaining() < 8) return false;
    *v = load_be64(in_.data() + pos_);
    pos_ += 8;
    return true;
  }
  // Copies out.size() octets; fails without copying if fewer remain.
  bool read_bytes(std::span<uint8_t> out) {
    if (remaining() < out.size()) return false;
    if (!out.empty()) std::memcpy(out.data(), in_.data() + pos_, out.size());
    pos_ += out.size();
    return true;
  }
  bool skip(size_t n) {
    if (remaining() < n) return false;
    pos_ += n;
    return true;
  }
  // The unread rest of the buffer (no copy).
  std::span<const uint8_t> rest() const { return in_.subspan(pos_); }
  size_t remaining() const { return in_.size() - pos_; }
  size_t position() const { return pos_; }

 private:
  std::span<const uint8_t> in_;  // Unowned.
  size_t pos_ = 0;
};

// Bounds-checked big-endian write cursor; write_* return false (writing nothing) when the
// buffer lacks room. The span must outlive the Writer. Not thread-safe.
class Writer {
 public:
  explicit Writer(std::span<uint8_t> out) : out_(out) {}
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  bool write_u8(uint8_t v) {
    if (remaining() < 1) return false;
    out_[pos_] = v;
    pos_ += 1;
    return true;
  }
  bool write_u16(uint16_t v) {
    if (remaining() < 2) return false;
    store_be16(out_.data() + pos_, v);
    pos_ += 2;
    return true;
  }
  bool write_u32(uint32_t v) {
    if (remaining() < 4) return false;
    store_be32(out_.data() + pos_, v);
    pos_ += 4;
    return true;
  }
  bool write_u64(uint64_t v) {
    if (remaining() < 8) return false;
    store_be64(out_.data() + pos_, v);
    pos_ += 8;
    return true;
  }
  bool write_bytes(std::span<const uint8_t> in) {
    if (remaining() < in.size()) return false;
    if (!in.empty()) std::memcpy(out_.data() + pos_, in.data(), in.size());
    pos_ += in.size();
    return true;
  }
  // Writes n zero octets (reserved fields, pad).
  bool write_zeros(size_t n) {
    if (remaining() < n) return false;
    if (n != 0) std::memset(out_.data() + pos_, 0, n);
    pos_ += n;
    return true;
  }
  bool skip(size_t n) {
    if (remaining() < n) return false;
    pos_ += n;
    return true;
  }
  size_t remaining() const { return out_.size() - pos_; }
  size_t position() const { return pos_; }

 private:
  std::span<uint8_t> out_;  // Unowned.
  size_t pos_ = 0;
};

}  // namespace uiw::wire

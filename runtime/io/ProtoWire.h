//===- ProtoWire.h - Protobuf's wire format, by hand ------------*- C++ -*-===//
//
// The few pieces of protobuf's encoding that the runtime reads and writes
// (tensor files, and the initializers of an ONNX model for --save-onnx),
// so that partc-run links no protobuf library. Internal to runtime/io.
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_RUNTIME_IO_PROTOWIRE_H
#define PARTC_RUNTIME_IO_PROTOWIRE_H

#include <cstdint>
#include <cstring>
#include <vector>

namespace partc::runtime::wire {

struct WireReader {
  const uint8_t *p, *end;
  bool ok = true;

  bool atEnd() const { return p >= end; }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p >= end) {
        ok = false;
        return 0;
      }
      uint8_t b = *p++;
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80))
        return v;
    }
    ok = false;
    return 0;
  }
  bool bytes(size_t n, const uint8_t *&out) {
    if (static_cast<size_t>(end - p) < n) {
      ok = false;
      return false;
    }
    out = p;
    p += n;
    return true;
  }
};

/// Appends the values of a repeated scalar field, packed or not.
template <typename T>
inline void readRepeated(WireReader &r, int wireType, std::vector<T> &out,
                         bool isFixed) {
  auto one = [&](WireReader &rr) {
    if (isFixed) {
      const uint8_t *b;
      if (rr.bytes(sizeof(T), b)) {
        T v;
        std::memcpy(&v, b, sizeof(T));
        out.push_back(v);
      }
    } else {
      out.push_back(static_cast<T>(rr.varint()));
    }
  };
  if (wireType == 2) {
    uint64_t len = r.varint();
    const uint8_t *b;
    if (!r.bytes(len, b))
      return;
    WireReader sub{b, b + len};
    while (!sub.atEnd() && sub.ok)
      one(sub);
    r.ok = r.ok && sub.ok;
  } else {
    one(r);
  }
}

inline void skipField(WireReader &r, int wireType) {
  const uint8_t *b;
  switch (wireType) {
  case 0:
    r.varint();
    break;
  case 1:
    r.bytes(8, b);
    break;
  case 2:
    r.bytes(r.varint(), b);
    break;
  case 5:
    r.bytes(4, b);
    break;
  default:
    r.ok = false;
  }
}

inline void putVarint(std::vector<uint8_t> &out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<uint8_t>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<uint8_t>(v));
}

} // namespace partc::runtime::wire

#endif // PARTC_RUNTIME_IO_PROTOWIRE_H

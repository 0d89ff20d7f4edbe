//===- Support.cpp --------------------------------------------------------===//
#include "runtime/Support.h"

#include <algorithm>
#include <atomic>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <unistd.h>

namespace partc::runtime {

size_t dtypeSize(DType t) {
  switch (t) {
  case DType::F32:
  case DType::I32:
  case DType::U32:
    return 4;
  case DType::U8:
  case DType::I8:
  case DType::Bool:
    return 1;
  case DType::U16:
  case DType::I16:
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::I64:
  case DType::U64:
  case DType::F64:
    return 8;
  case DType::Invalid:
    return 0;
  }
  return 0;
}

const char *dtypeName(DType t) {
  switch (t) {
  case DType::F32:
    return "f32";
  case DType::U8:
    return "u8";
  case DType::I8:
    return "i8";
  case DType::U16:
    return "u16";
  case DType::I16:
    return "i16";
  case DType::I32:
    return "i32";
  case DType::I64:
    return "i64";
  case DType::Bool:
    return "bool";
  case DType::F16:
    return "f16";
  case DType::F64:
    return "f64";
  case DType::U32:
    return "u32";
  case DType::U64:
    return "u64";
  case DType::BF16:
    return "bf16";
  case DType::Invalid:
    return "invalid";
  }
  return "invalid";
}

bool isValidDType(uint32_t raw) {
  switch (raw) {
  case 1:
  case 2:
  case 3:
  case 4:
  case 5:
  case 6:
  case 7:
  case 9:
  case 10:
  case 11:
  case 12:
  case 13:
  case 16:
    return true;
  default:
    return false;
  }
}

int64_t numElements(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

static std::atomic<uint64_t> memoryLimit{UINT64_MAX};

uint64_t hostMemoryBytes() {
  uint64_t physical =
      uint64_t(sysconf(_SC_PHYS_PAGES)) * uint64_t(sysconf(_SC_PAGE_SIZE));
  return std::min(physical, memoryLimit.load(std::memory_order_relaxed));
}

void limitHostMemory(uint64_t bytes) {
  memoryLimit.store(bytes, std::memory_order_relaxed);
}

std::optional<uint64_t> checkedByteSize(const TensorType &type) {
  // Empty dimensions count as 1 in the bound (strides of [0, 2^40, 2^40]
  // overflow too), not in the size. Both stay at most 2^50: no wrapping.
  uint64_t bound = dtypeSize(type.dtype), bytes = bound;
  for (int64_t d : type.shape) {
    if (d < 0)
      return std::nullopt;
    if (d > 1 && bound > kMaxTensorBytes / static_cast<uint64_t>(d))
      return std::nullopt;
    bound *= static_cast<uint64_t>(d > 1 ? d : 1);
    bytes *= static_cast<uint64_t>(d);
  }
  return bytes;
}

bool broadcastShapes(const Shape &a, const Shape &b, Shape &out) {
  size_t rank = std::max(a.size(), b.size());
  out.assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return false;
    out[i] = da == 1 ? db : da;
  }
  return true;
}

Shape channelsFirstShape(Shape shape) {
  if (shape.size() >= 3)
    std::rotate(shape.begin() + 1, shape.end() - 1, shape.end());
  return shape;
}

std::string shapeToString(const Shape &shape) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i)
    os << (i ? "," : "") << shape[i];
  os << "]";
  return os.str();
}

std::string TensorType::str() const {
  return std::string(dtypeName(dtype)) + shapeToString(shape);
}

float halfToFloat(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else { // subnormal: normalize
      exp = 127 - 15 + 1;
      while (!(mant & 0x400)) {
        mant <<= 1;
        --exp;
      }
      bits = sign | (exp << 23) | ((mant & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

/// Round to nearest even, as numpy's astype(float16).
uint16_t floatToHalf(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  uint16_t sign = (bits >> 16) & 0x8000;
  uint32_t absBits = bits & 0x7fffffffu;
  if (absBits >= 0x7f800000u) // inf or nan
    return sign | 0x7c00 | (absBits > 0x7f800000u ? 0x200 : 0);
  if (absBits >= 0x477ff000u) // rounds to >= 65520: overflow
    return sign | 0x7c00;
  if (absBits < 0x38800000u) { // subnormal or zero in half
    float a;
    std::memcpy(&a, &absBits, 4);
    // Scale so that the half subnormal unit becomes 1, then round (RNE).
    return sign | static_cast<uint16_t>(std::nearbyint(a * 16777216.0f));
  }
  uint32_t mant = absBits & 0x7fffff;
  uint32_t exp = (absBits >> 23) - 127 + 15;
  uint32_t half = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1)))
    ++half;
  return sign | static_cast<uint16_t>(half);
}

float bf16ToFloat(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t floatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((bits >> 16) | 0x40);
  uint32_t rounding = 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

} // namespace partc::runtime

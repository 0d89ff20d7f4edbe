//===- Support.cpp --------------------------------------------------------===//
#include "runtime/Support.h"

#include <sstream>

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
  case 1: case 2: case 3: case 4: case 5: case 6: case 7: case 9: case 10:
  case 11: case 12: case 13: case 16:
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

} // namespace partc::runtime

//===- Support.h - Basic runtime types: status, dtypes, tensor refs -------===//
//
// Shared by the plan format, the kernels and the executors. Has no dependency
// on MLIR or LLVM: the runtime must build and run without them.
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_RUNTIME_SUPPORT_H
#define PARTC_RUNTIME_SUPPORT_H

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace partc::runtime {

/// An error message or success. Cheap to pass around; never throws.
class Status {
public:
  Status() = default;
  static Status error(std::string message) {
    Status s;
    s.failed_ = true;
    s.message_ = std::move(message);
    return s;
  }
  bool ok() const { return !failed_; }
  explicit operator bool() const { return !failed_; }
  const std::string &message() const { return message_; }
  /// Prepends context such as a node or file name.
  Status &prepend(const std::string &context) {
    if (failed_)
      message_ = context + ": " + message_;
    return *this;
  }

private:
  bool failed_ = false;
  std::string message_;
};

#define PARTC_RETURN_IF_ERROR(expr)                                            \
  do {                                                                         \
    ::partc::runtime::Status status_ = (expr);                                 \
    if (!status_.ok())                                                         \
      return status_;                                                          \
  } while (false)

/// Element types; the numbers are ONNX's TensorProto.DataType values so that
/// test data files map directly.
enum class DType : uint8_t {
  Invalid = 0,
  F32 = 1,
  U8 = 2,
  I8 = 3,
  U16 = 4,
  I16 = 5,
  I32 = 6,
  I64 = 7,
  Bool = 9,
  F16 = 10,
  F64 = 11,
  U32 = 12,
  U64 = 13,
  BF16 = 16,
};

/// Size of one element in bytes, or 0 for an invalid type.
size_t dtypeSize(DType t);
const char *dtypeName(DType t);
bool isValidDType(uint32_t raw);

using Shape = std::vector<int64_t>;

/// IEEE half and bfloat16 conversions (round to nearest even).
float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
float bf16ToFloat(uint16_t h);
uint16_t floatToBf16(float f);

int64_t numElements(const Shape &shape);

/// Output shape of a numpy-style broadcast of `a` and `b`; false if they do
/// not broadcast. Shared by the kernels and the compiler's shape rules.
bool broadcastShapes(const Shape &a, const Shape &b, Shape &out);
std::string shapeToString(const Shape &shape);
/// [N, spatial..., C] -> [N, C, spatial...]: a channels-last shape in the
/// order channels-first code (and cuDNN descriptors) expect.
Shape channelsFirstShape(Shape shape);

struct TensorType {
  DType dtype = DType::Invalid;
  Shape shape;

  int64_t numElements() const { return runtime::numElements(shape); }
  size_t byteSize() const {
    return static_cast<size_t>(numElements()) * dtypeSize(dtype);
  }
  std::string str() const;
  bool operator==(const TensorType &o) const {
    return dtype == o.dtype && shape == o.shape;
  }
  bool operator!=(const TensorType &o) const { return !(*this == o); }
};

/// The largest tensor partc accepts anywhere (2^50 bytes, beyond any
/// machine's memory). Declared sizes (in models, plans and input files) are
/// checked against it before anything is allocated or multiplied further.
constexpr uint64_t kMaxTensorBytes = uint64_t(1) << 50;

/// The byte size of `type`, or nothing if a dimension is negative or the
/// size exceeds kMaxTensorBytes (or overflows on the way).
std::optional<uint64_t> checkedByteSize(const TensorType &type);

/// This machine's physical memory in bytes, against which plans, inputs and
/// weights are checked before they are allocated.
uint64_t hostMemoryBytes();
/// Makes hostMemoryBytes() report at most `bytes`: the fuzz targets run as
/// if on a small machine, under the memory limit of their sanitizers.
void limitHostMemory(uint64_t bytes);

/// A typed view of memory owned elsewhere.
struct TensorRef {
  void *data = nullptr;
  TensorType type;

  template <typename T> T *as() const { return static_cast<T *>(data); }
};

} // namespace partc::runtime

#endif // PARTC_RUNTIME_SUPPORT_H

//===- FuzzTensorFile.cpp - libFuzzer target: tensor and model readers ----===//
//
// Input: a selector byte, then a file's contents. Selectors below 0xf0:
// even a .npy, odd an ONNX TensorProto .pb; a tensor that decodes must hold
// exactly the bytes its type declares. 0xf0 and above: an ONNX model whose
// initializers 'w' (f32[4,3]) and 'b' (f32[3]) partc-run --save-onnx
// replaces; a copy that is made must parse again with the same values.
//
//===----------------------------------------------------------------------===//
#include "runtime/io/OnnxWeights.h"
#include "runtime/io/TensorFile.h"

#include <cstdio>
#include <cstdlib>

using namespace partc::runtime;

// The sanitizers' memory limit is below this machine's: run as if on a
// machine of 512 MiB, so that sizes a real machine would accept but the
// fuzzer cannot hold are refused as too large rather than reported as
// out-of-memory.
extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  ::partc::runtime::limitHostMemory(uint64_t(512) << 20);
  return 0;
}

namespace {

HostTensor filled(const char *name, Shape shape, float value) {
  HostTensor t;
  t.name = name;
  t.type = {DType::F32, std::move(shape)};
  t.data.resize(t.type.byteSize());
  for (size_t i = 0; i < t.data.size() / 4; ++i)
    reinterpret_cast<float *>(t.data.data())[i] = value;
  return t;
}

void fuzzSaveOnnx(const std::vector<uint8_t> &model) {
  std::vector<HostTensor> values = {filled("w", {4, 3}, 1.5f),
                                    filled("b", {3}, -2.f)};
  std::vector<uint8_t> out;
  if (!rewriteOnnxInitializers(model, "fuzz.onnx", values, true, out).ok())
    return;
  // The copy holds every value: rewriting it again must succeed and give
  // the same bytes.
  std::vector<uint8_t> again;
  if (!rewriteOnnxInitializers(out, "copy.onnx", values, true, again).ok() ||
      again != out) {
    std::fprintf(stderr, "a --save-onnx copy does not rewrite to itself\n");
    std::abort();
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  std::vector<uint8_t> bytes(data + 1, data + size);
  if (data[0] >= 0xf0) {
    fuzzSaveOnnx(bytes);
    return 0;
  }
  HostTensor tensor;
  const char *name = data[0] % 2 ? "fuzz.pb" : "fuzz.npy";
  if (!parseTensorFile(bytes, name, tensor).ok())
    return 0;
  std::optional<uint64_t> declared = checkedByteSize(tensor.type);
  if (!declared || *declared != tensor.data.size()) {
    std::fprintf(stderr, "%s decoded as %s with %zu bytes\n", name,
                 tensor.type.str().c_str(), tensor.data.size());
    std::abort();
  }
  return 0;
}

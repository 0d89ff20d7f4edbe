//===- FuzzTensorFile.cpp - libFuzzer target: .npy and .pb input readers --===//
//
// Input: a selector byte (even: .npy, odd: ONNX TensorProto .pb), then the
// file's contents. A tensor that decodes must hold exactly the bytes its
// type declares.
//
//===----------------------------------------------------------------------===//
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

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  std::vector<uint8_t> bytes(data + 1, data + size);
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

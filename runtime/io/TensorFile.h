//===- TensorFile.h - Tensors in .npy and ONNX TensorProto (.pb) files ----===//
//
// The ONNX protobuf wire format is decoded by hand here so that partc-run
// needs no protobuf library at run time; only the TensorProto fields that
// test data uses are read.
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_RUNTIME_IO_TENSORFILE_H
#define PARTC_RUNTIME_IO_TENSORFILE_H

#include "runtime/Support.h"

#include <string>
#include <vector>

namespace partc::runtime {

struct HostTensor {
  std::string name;
  TensorType type;
  std::vector<uint8_t> data;

  TensorRef ref() { return TensorRef{data.data(), type}; }
};

/// Reads `.npy` or ONNX TensorProto `.pb` (chosen by extension). Files
/// larger than `maxFileBytes`, and anything but a regular file, are refused
/// before they are read.
Status readTensorFile(const std::string &path, HostTensor &tensor,
                      uint64_t maxFileBytes);

/// Decodes the contents of a tensor file named `path` (for its extension
/// and for messages).
Status parseTensorFile(const std::vector<uint8_t> &bytes,
                       const std::string &path, HostTensor &tensor);

/// Reads a regular file of at most `maxBytes` bytes whole; anything else
/// (a directory, a device, a pipe) or a larger file is refused first.
Status readWholeFile(const std::string &path, uint64_t maxBytes,
                     std::vector<uint8_t> &bytes);

/// The largest file that can hold a tensor of `tensorBytes` bytes.
uint64_t tensorFileLimit(uint64_t tensorBytes);
Status writeTensorFile(const std::string &path, const HostTensor &tensor);

Status parseTensorProto(const uint8_t *data, size_t size, HostTensor &tensor);
std::vector<uint8_t> serializeTensorProto(const HostTensor &tensor);

} // namespace partc::runtime

#endif // PARTC_RUNTIME_IO_TENSORFILE_H

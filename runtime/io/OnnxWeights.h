//===- OnnxWeights.h - An ONNX model with trained weights ------*- C++ -*-===//
//
// partc-run --save-onnx: the model a training plan was compiled from,
// written again with its initializers replaced by the trained values. The
// protobuf is edited on the wire (every other field is copied byte for
// byte), so the runtime needs no ONNX or protobuf library.
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_RUNTIME_IO_ONNXWEIGHTS_H
#define PARTC_RUNTIME_IO_ONNXWEIGHTS_H

#include "runtime/io/TensorFile.h"

#include <string>
#include <vector>

namespace partc::runtime {

/// Copies the ONNX model `modelPath` to `outPath`, each graph initializer
/// named like one of `values` replaced by that tensor (stored inline).
/// Fails, writing nothing, where a value's type differs from its
/// initializer's, a value names no initializer, the model is not a readable
/// ONNX file, or the result would pass protobuf's 2 GiB limit. Initializers
/// left alone keep their external data, which must then resolve from
/// `outPath`'s folder as from the model's.
Status writeOnnxWithInitializers(const std::string &modelPath,
                                 const std::string &outPath,
                                 const std::vector<HostTensor> &values);

/// The bytes of that copy, from the model's bytes (`modelPath` names it in
/// errors). `keepExternal`: initializers left alone may keep external data
/// (the copy is written beside the model); otherwise they are refused.
Status rewriteOnnxInitializers(const std::vector<uint8_t> &model,
                               const std::string &modelPath,
                               const std::vector<HostTensor> &values,
                               bool keepExternal, std::vector<uint8_t> &out);

} // namespace partc::runtime

#endif // PARTC_RUNTIME_IO_ONNXWEIGHTS_H

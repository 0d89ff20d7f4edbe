//===- OnnxWeights.cpp ----------------------------------------------------===//
#include "runtime/io/OnnxWeights.h"
#include "runtime/io/ProtoWire.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <utility>

namespace partc::runtime {

using namespace wire;

namespace {

// Field numbers of onnx.proto.
constexpr uint64_t kModelGraph = 7;
constexpr uint64_t kGraphInitializer = 5;
constexpr uint64_t kTensorDims = 1, kTensorDataType = 2, kTensorName = 8,
                   kTensorDataLocation = 14;
constexpr uint64_t kDataLocationExternal = 1;
constexpr uint64_t kProtobufLimit = uint64_t(2) << 30;

struct TensorHeader {
  std::string name;
  Shape dims;
  uint64_t dataType = 0;
  bool external = false;
};

bool readTensorHeader(const uint8_t *data, size_t size, TensorHeader &h) {
  WireReader r{data, data + size};
  while (!r.atEnd() && r.ok) {
    uint64_t tag = r.varint();
    uint64_t field = tag >> 3;
    int wireType = static_cast<int>(tag & 7);
    if (field == kTensorDims && (wireType == 0 || wireType == 2)) {
      std::vector<int64_t> dims;
      readRepeated(r, wireType, dims, /*isFixed=*/false);
      h.dims.insert(h.dims.end(), dims.begin(), dims.end());
    } else if (field == kTensorDataType && wireType == 0) {
      h.dataType = r.varint();
    } else if (field == kTensorName && wireType == 2) {
      const uint8_t *b;
      uint64_t len = r.varint();
      if (r.bytes(len, b))
        h.name.assign(reinterpret_cast<const char *>(b), len);
    } else if (field == kTensorDataLocation && wireType == 0) {
      h.external = r.varint() == kDataLocationExternal;
    } else {
      skipField(r, wireType);
    }
  }
  return r.ok;
}

/// The folder part of `path`, resolved, or "" if it does not exist.
std::string realFolder(const std::string &path) {
  size_t slash = path.rfind('/');
  std::string folder = slash == std::string::npos ? "." : path.substr(0, slash);
  if (folder.empty())
    folder = "/";
  char resolved[PATH_MAX];
  return ::realpath(folder.c_str(), resolved) ? resolved : "";
}

void appendField(std::vector<uint8_t> &out, uint64_t field,
                 const std::vector<uint8_t> &payload) {
  putVarint(out, (field << 3) | 2);
  putVarint(out, payload.size());
  out.insert(out.end(), payload.begin(), payload.end());
}

/// Copies a message's fields into `out` byte for byte, but for the
/// length-delimited fields numbered `field`: `rewrite(payload, size,
/// original)` appends what stands for each (`original`: the whole field's
/// bytes). `parsed` says whether the message parsed to its end.
template <typename Rewrite>
Status rewriteFields(const uint8_t *data, size_t size, uint64_t field,
                     std::vector<uint8_t> &out, bool &parsed,
                     Rewrite &&rewrite) {
  WireReader r{data, data + size};
  while (!r.atEnd() && r.ok) {
    const uint8_t *start = r.p;
    uint64_t tag = r.varint();
    int wireType = static_cast<int>(tag & 7);
    if ((tag >> 3) != field || wireType != 2) {
      skipField(r, wireType);
      if (r.ok)
        out.insert(out.end(), start, r.p);
      continue;
    }
    const uint8_t *payload;
    uint64_t len = r.varint();
    if (!r.bytes(len, payload))
      break;
    PARTC_RETURN_IF_ERROR(
        rewrite(payload, static_cast<size_t>(len), std::make_pair(start, r.p)));
  }
  parsed = r.ok;
  return Status();
}

/// The graph's bytes with the initializers in `values` replaced; `used`
/// marks the values that found theirs.
Status rewriteGraph(const uint8_t *data, size_t size,
                    const std::map<std::string, const HostTensor *> &values,
                    std::map<std::string, bool> &used, bool keepExternal,
                    const std::string &modelPath, std::vector<uint8_t> &out) {
  bool parsed = false;
  PARTC_RETURN_IF_ERROR(rewriteFields(
      data, size, kGraphInitializer, out, parsed,
      [&](const uint8_t *tensor, size_t len,
          std::pair<const uint8_t *, const uint8_t *> original) -> Status {
        TensorHeader header;
        if (!readTensorHeader(tensor, len, header))
          return Status::error("'" + modelPath +
                               "': an initializer is not a valid TensorProto");
        auto it = values.find(header.name);
        if (it == values.end()) {
          if (header.external && !keepExternal)
            return Status::error(
                "'" + modelPath + "' keeps initializer '" + header.name +
                "' in an external data file, which would not resolve from "
                "another folder; write the trained model into the model's "
                "own folder");
          out.insert(out.end(), original.first, original.second);
          return Status();
        }
        const HostTensor &value = *it->second;
        if (header.dims != value.type.shape ||
            header.dataType != static_cast<uint64_t>(value.type.dtype)) {
          TensorType was{static_cast<DType>(header.dataType), header.dims};
          return Status::error(
              "'" + modelPath + "': initializer '" + header.name + "' is " +
              was.str() + ", but the plan trained it as " + value.type.str() +
              "; was the plan compiled from this model?");
        }
        used[header.name] = true;
        appendField(out, kGraphInitializer, serializeTensorProto(value));
        return Status();
      }));
  if (!parsed)
    return Status::error("'" + modelPath +
                         "' is not a valid ONNX model (its graph does not "
                         "parse)");
  return Status();
}

} // namespace

Status rewriteOnnxInitializers(const std::vector<uint8_t> &model,
                               const std::string &modelPath,
                               const std::vector<HostTensor> &values,
                               bool keepExternal, std::vector<uint8_t> &out) {
  std::map<std::string, const HostTensor *> byName;
  std::map<std::string, bool> used;
  for (const HostTensor &v : values) {
    byName[v.name] = &v;
    used[v.name] = false;
  }
  out.clear();
  bool parsed = false, sawGraph = false;
  PARTC_RETURN_IF_ERROR(rewriteFields(
      model.data(), model.size(), kModelGraph, out, parsed,
      [&](const uint8_t *graph, size_t len, auto) -> Status {
        std::vector<uint8_t> newGraph;
        PARTC_RETURN_IF_ERROR(rewriteGraph(graph, len, byName, used,
                                           keepExternal, modelPath, newGraph));
        appendField(out, kModelGraph, newGraph);
        sawGraph = true;
        return Status();
      }));
  if (!parsed || !sawGraph)
    return Status::error("'" + modelPath +
                         "' is not a valid ONNX model (no graph could be "
                         "read)");
  for (const auto &[name, found] : used)
    if (!found)
      return Status::error("'" + modelPath + "' has no initializer '" + name +
                           "', which the plan trained; was the plan compiled "
                           "from this model?");
  if (out.size() >= kProtobufLimit)
    return Status::error("the trained model would take " +
                         std::to_string(out.size()) +
                         " bytes, past protobuf's 2 GiB limit; save the "
                         "weights with --save-state instead");
  return Status();
}

Status writeOnnxWithInitializers(const std::string &modelPath,
                                 const std::string &outPath,
                                 const std::vector<HostTensor> &values) {
  std::vector<uint8_t> model;
  PARTC_RETURN_IF_ERROR(readWholeFile(modelPath, kProtobufLimit, model));
  std::string modelFolder = realFolder(modelPath);
  std::string outFolder = realFolder(outPath);
  if (outFolder.empty())
    return Status::error("cannot write '" + outPath +
                         "': its folder does not exist");
  std::vector<uint8_t> out;
  PARTC_RETURN_IF_ERROR(rewriteOnnxInitializers(model, modelPath, values,
                                                modelFolder == outFolder, out));
  std::ofstream file(outPath, std::ios::binary | std::ios::trunc);
  file.write(reinterpret_cast<const char *>(out.data()),
             static_cast<std::streamsize>(out.size()));
  if (!file)
    return Status::error("cannot write '" + outPath +
                         "': " + std::strerror(errno));
  return Status();
}

} // namespace partc::runtime

//===- OnnxImporter.cpp - ONNX model to graph dialect ---------------------===//
#include "frontends/onnx/OnnxImporter.h"
#include "frontends/onnx/NodeImporter.h"

#include "dialects/Graph/GraphOps.h"
#include "dialects/Graph/RuntimeBridge.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>

#include "runtime/io/TensorFile.h"

#include <climits>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <optional>
#include <set>
#include <unistd.h>

namespace mlir::partc::onnx_import {

//===----------------------------------------------------------------------===//
// NodeImporter
//===----------------------------------------------------------------------===//

const onnx::AttributeProto *NodeImporter::attr(llvm::StringRef name) const {
  for (const auto &a : node_.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

int64_t NodeImporter::attrInt(llvm::StringRef name, int64_t dflt) const {
  const auto *a = attr(name);
  return a ? a->i() : dflt;
}

double NodeImporter::attrFloat(llvm::StringRef name, double dflt) const {
  const auto *a = attr(name);
  return a ? a->f() : dflt;
}

std::string NodeImporter::attrString(llvm::StringRef name,
                                     const std::string &dflt) const {
  const auto *a = attr(name);
  return a ? a->s() : dflt;
}

std::optional<SmallVector<int64_t>>
NodeImporter::attrInts(llvm::StringRef name) const {
  const auto *a = attr(name);
  if (!a)
    return std::nullopt;
  return SmallVector<int64_t>(a->ints().begin(), a->ints().end());
}

InFlightDiagnostic NodeImporter::error() {
  return emitError(loc_) << node_.op_type() << ": ";
}

InFlightDiagnostic NodeImporter::notConstant(Value v, llvm::StringRef what) {
  std::string name;
  for (size_t i = 0; i < inputs_.size(); ++i)
    if (v && inputs_[i] == v)
      name = node_.input(i);
  return error() << what << " ('" << name
                 << "') must be a compile-time constant; partc needs static "
                    "shapes (freeze a graph input with --const-input "
                 << name << "=FILE)";
}

/// The most elements of a constant operand read as shape or parameter
/// values.
static constexpr int64_t kMaxConstantOperand = int64_t(1) << 20;

FailureOr<SmallVector<int64_t>> NodeImporter::constInts(Value v,
                                                        llvm::StringRef what) {
  Attribute attr;
  if (!v || !matchPattern(v, m_Constant(&attr)))
    return notConstant(v, what), failure();
  auto elements = cast<ElementsAttr>(attr);
  auto type = cast<ShapedType>(elements.getType());
  // Shapes and parameters are small; a large (splat) constant is not
  // expanded into memory to be read as one.
  if (type.getNumElements() > kMaxConstantOperand)
    return error() << what << " has " << type.getNumElements()
                   << " elements; partc reads at most " << kMaxConstantOperand
                   << " as a shape or parameter",
           failure();
  std::vector<uint8_t> bytes = elementsToBytes(elements);
  SmallVector<int64_t> out;
  Type et = type.getElementType();
  unsigned width = et.isInteger() ? et.getIntOrFloatBitWidth() : 0;
  if (width != 32 && width != 64)
    return error() << what << " must be an i32 or i64 tensor", failure();
  for (int64_t i = 0; i < type.getNumElements(); ++i) {
    if (width == 64) {
      int64_t x;
      std::memcpy(&x, bytes.data() + 8 * i, 8);
      out.push_back(x);
    } else {
      int32_t x;
      std::memcpy(&x, bytes.data() + 4 * i, 4);
      out.push_back(x);
    }
  }
  return out;
}

FailureOr<SmallVector<double>> NodeImporter::constFloats(Value v,
                                                         llvm::StringRef what) {
  Attribute attr;
  if (!v || !matchPattern(v, m_Constant(&attr)))
    return notConstant(v, what), failure();
  auto elements = cast<ElementsAttr>(attr);
  auto type = cast<ShapedType>(elements.getType());
  // Shapes and parameters are small; a large (splat) constant is not
  // expanded into memory to be read as one.
  if (type.getNumElements() > kMaxConstantOperand)
    return error() << what << " has " << type.getNumElements()
                   << " elements; partc reads at most " << kMaxConstantOperand
                   << " as a shape or parameter",
           failure();
  std::vector<uint8_t> bytes = elementsToBytes(elements);
  SmallVector<double> out;
  rt::DType dt = toDType(type.getElementType());
  for (int64_t i = 0; i < type.getNumElements(); ++i) {
    const uint8_t *p = bytes.data() + i * rt::dtypeSize(dt);
    switch (dt) {
    case rt::DType::F32: {
      float x;
      std::memcpy(&x, p, 4);
      out.push_back(x);
      break;
    }
    case rt::DType::F64: {
      double x;
      std::memcpy(&x, p, 8);
      out.push_back(x);
      break;
    }
    case rt::DType::I64: {
      int64_t x;
      std::memcpy(&x, p, 8);
      out.push_back(x);
      break;
    }
    case rt::DType::I32: {
      int32_t x;
      std::memcpy(&x, p, 4);
      out.push_back(x);
      break;
    }
    case rt::DType::I8:
      out.push_back(static_cast<int8_t>(*p));
      break;
    case rt::DType::U8:
      out.push_back(*p);
      break;
    case rt::DType::I16: {
      int16_t x;
      std::memcpy(&x, p, 2);
      out.push_back(x);
      break;
    }
    case rt::DType::U16: {
      uint16_t x;
      std::memcpy(&x, p, 2);
      out.push_back(x);
      break;
    }
    case rt::DType::U32: {
      uint32_t x;
      std::memcpy(&x, p, 4);
      out.push_back(x);
      break;
    }
    case rt::DType::U64: {
      uint64_t x;
      std::memcpy(&x, p, 8);
      out.push_back(double(x));
      break;
    }
    default:
      return error() << what << " has an unsupported element type", failure();
    }
  }
  return out;
}

Value NodeImporter::constant(ShapedType type, ArrayRef<uint8_t> bytes) {
  return graph::ConstantOp::create(builder_, loc_, type,
                                   bytesToElements(type, bytes));
}

FailureOr<SmallVector<Value>>
NodeImporter::build(llvm::StringRef opName, ValueRange operands,
                    ArrayRef<NamedAttribute> attrs, unsigned numResults) {
  MLIRContext *ctx = builder_.getContext();
  OperationState state(loc_, ("graph." + opName).str());
  auto info = state.name.getRegisteredInfo();
  if (!info)
    return error() << "internal: no op graph." << opName, failure();
  state.addOperands(operands);
  state.addAttributes(attrs);
  SmallVector<Type> types;
  auto *infer = info->getInterface<InferTypeOpInterface>();
  if (failed(infer->inferReturnTypes(ctx, loc_, state.operands,
                                     state.attributes.getDictionary(ctx),
                                     OpaqueProperties(nullptr), {}, types)))
    return failure();
  if (types.size() != numResults && opName != "split")
    return error() << "internal: result count mismatch", failure();
  for (auto [i, type] : llvm::enumerate(types)) {
    std::string problem = graph::tensorSizeProblem(cast<ShapedType>(type));
    if (!problem.empty())
      return error() << "result " << i << " " << problem
                     << "; check the node's shape inputs and attributes",
             failure();
  }
  state.addTypes(types);
  Operation *op = builder_.create(state);

  // Fold right away so that shape arithmetic becomes constants.
  SmallVector<Attribute> constOperands;
  for (Value v : op->getOperands()) {
    Attribute a;
    constOperands.push_back(matchPattern(v, m_Constant(&a)) ? a : Attribute());
  }
  SmallVector<OpFoldResult> folded;
  bool readsParameter =
      keepParameters_ && llvm::any_of(op->getOperands(), [](Value v) {
        auto c = v.getDefiningOp<graph::ConstantOp>();
        return c && c->hasAttr(graph::GraphDialect::kInitializerAttrName) &&
               isa<FloatType>(getElementTypeOrSelf(v.getType()));
      });
  if (!readsParameter &&
      llvm::all_of(constOperands, [](Attribute a) { return bool(a); }) &&
      succeeded(op->fold(constOperands, folded)) && !folded.empty()) {
    SmallVector<Value> values;
    for (auto [i, r] : llvm::enumerate(folded)) {
      if (auto v = dyn_cast<Value>(r)) {
        values.push_back(v);
        continue;
      }
      values.push_back(
          graph::ConstantOp::create(builder_, loc_, op->getResult(i).getType(),
                                    cast<ElementsAttr>(cast<Attribute>(r))));
    }
    if (values.size() == op->getNumResults() &&
        llvm::none_of(values,
                      [&](Value v) { return v.getDefiningOp() == op; })) {
      op->erase();
      return values;
    }
  }
  return SmallVector<Value>(op->getResults());
}

FailureOr<Value> NodeImporter::build1(llvm::StringRef opName,
                                      ValueRange operands,
                                      ArrayRef<NamedAttribute> attrs) {
  auto r = build(opName, operands, attrs, 1);
  if (failed(r))
    return failure();
  return (*r)[0];
}

NamedAttribute NodeImporter::i64(llvm::StringRef name, int64_t v) {
  return builder_.getNamedAttr(name, builder_.getI64IntegerAttr(v));
}
NamedAttribute NodeImporter::unit(llvm::StringRef name) {
  return builder_.getNamedAttr(name, builder_.getUnitAttr());
}
NamedAttribute NodeImporter::f64(llvm::StringRef name, double v) {
  return builder_.getNamedAttr(name, builder_.getF64FloatAttr(v));
}
NamedAttribute NodeImporter::ints(llvm::StringRef name, ArrayRef<int64_t> v) {
  return builder_.getNamedAttr(name, builder_.getDenseI64ArrayAttr(v));
}
NamedAttribute NodeImporter::str(llvm::StringRef name, llvm::StringRef v) {
  return builder_.getNamedAttr(name, builder_.getStringAttr(v));
}

Type elementTypeFor(MLIRContext *ctx, int32_t onnxType) {
  if (onnxType == onnx::TensorProto::STRING ||
      !rt::isValidDType(static_cast<uint32_t>(onnxType)))
    return Type();
  return fromDType(ctx, static_cast<rt::DType>(onnxType));
}

//===----------------------------------------------------------------------===//
// Model import
//===----------------------------------------------------------------------===//

namespace {

class ModelImporter {
public:
  /// Reads the model from `path`, or from `contents` where given (external
  /// data is still looked up beside `path`).
  ModelImporter(MLIRContext *ctx, const std::string &path,
                const ImportOptions &options,
                std::optional<llvm::StringRef> contents = std::nullopt)
      : ctx_(ctx), path_(path), contents_(contents), options_(options),
        builder_(ctx) {}

  OwningOpRef<ModuleOp> run();
  LogicalResult checkSupported(const onnx::GraphProto &g);

private:
  Location fileLoc() { return FileLineColLoc::get(ctx_, path_, 0, 0); }
  Location nodeLoc(const onnx::NodeProto &node, int index);
  LogicalResult load(onnx::ModelProto &model);
  FailureOr<Value> importTensor(const onnx::TensorProto &tensor, Location loc);
  LogicalResult readExternal(const onnx::TensorProto &tensor, size_t bytes,
                             Location loc, ArrayRef<char> &data);
  FailureOr<RankedTensorType> inputType(const onnx::ValueInfoProto &info);
  LogicalResult checkBindingsUsed(const onnx::GraphProto &g);

  MLIRContext *ctx_;
  std::string path_;
  std::optional<llvm::StringRef> contents_;
  ImportOptions options_;
  OpBuilder builder_;
  std::map<std::string, Value> values_;
  std::map<std::string, std::unique_ptr<llvm::MemoryBuffer>> externalFiles_;
  /// The first dynamic leading dimension's value (the metadata's batch).
  std::optional<int64_t> leadingDim_;
};

Location ModelImporter::nodeLoc(const onnx::NodeProto &node, int index) {
  std::string name = node.name().empty()
                         ? node.op_type() + "#" + std::to_string(index)
                         : node.name();
  return NameLoc::get(StringAttr::get(ctx_, name), fileLoc());
}

LogicalResult ModelImporter::load(onnx::ModelProto &model) {
  bool parsed;
  if (contents_) {
    parsed = contents_->size() <= INT_MAX &&
             model.ParseFromArray(contents_->data(),
                                  static_cast<int>(contents_->size()));
  } else {
    int fd = ::open(path_.c_str(), O_RDONLY);
    if (fd < 0)
      return emitError(fileLoc())
             << "cannot open the model: " << std::strerror(errno);
    google::protobuf::io::FileInputStream raw(fd);
    raw.SetCloseOnDelete(true);
    google::protobuf::io::CodedInputStream coded(&raw);
    coded.SetTotalBytesLimit(INT_MAX);
    parsed =
        model.ParseFromCodedStream(&coded) && coded.ConsumedEntireMessage();
  }
  if (!parsed)
    return emitError(fileLoc())
           << "is not a valid ONNX model (protobuf parse failed; the file may "
              "be truncated or of another format)";
  if (!model.has_graph() || model.ir_version() <= 0)
    return emitError(fileLoc())
           << "is not an ONNX model (no graph or IR version)";
  return success();
}

LogicalResult ModelImporter::readExternal(const onnx::TensorProto &tensor,
                                          size_t bytes, Location loc,
                                          ArrayRef<char> &data) {
  std::string location;
  uint64_t offset = 0, length = bytes;
  bool hasLength = false;
  for (const auto &kv : tensor.external_data()) {
    if (kv.key() == "location") {
      location = kv.value();
    } else if (kv.key() == "offset" || kv.key() == "length") {
      uint64_t value;
      if (llvm::StringRef(kv.value()).getAsInteger(10, value))
        return emitError(loc)
               << "external tensor '" << tensor.name() << "' has " << kv.key()
               << " '" << kv.value()
               << "', which is not a whole number of bytes below 2^64";
      if (kv.key() == "offset") {
        offset = value;
      } else {
        length = value;
        hasLength = true;
      }
    }
  }
  if (location.empty())
    return emitError(loc) << "external tensor '" << tensor.name()
                          << "' has no location";
  // As ONNX's checker requires, external data stays in the model's
  // directory: no absolute paths, and no way out through '..' or links.
  llvm::SmallString<256> dir = llvm::sys::path::parent_path(path_);
  if (dir.empty())
    dir = ".";
  llvm::SmallString<256> file = dir;
  llvm::sys::path::append(file, location);
  llvm::SmallString<256> realDir, realFile;
  bool inside = !llvm::sys::path::is_absolute(location) &&
                !llvm::sys::fs::real_path(dir, realDir) &&
                (llvm::sys::fs::real_path(file, realFile) ||
                 llvm::StringRef(realFile).starts_with(
                     (realDir + llvm::sys::path::get_separator()).str()));
  if (!inside)
    return emitError(loc) << "external data '" << location << "' of tensor '"
                          << tensor.name()
                          << "' lies outside the model's directory '" << dir
                          << "'; move it beside the model";
  auto &buffer = externalFiles_[std::string(file)];
  if (!buffer) {
    auto mapped = llvm::MemoryBuffer::getFile(file, /*IsText=*/false,
                                              /*RequiresNullTerminator=*/false);
    if (!mapped)
      return emitError(loc)
             << "cannot read external data '" << file << "' of tensor '"
             << tensor.name() << "': " << mapped.getError().message();
    buffer = std::move(*mapped);
  }
  if ((hasLength && length != bytes) || offset > buffer->getBufferSize() ||
      bytes > buffer->getBufferSize() - offset)
    return emitError(loc) << "external data of tensor '" << tensor.name()
                          << "' does not fit '" << file << "' (" << bytes
                          << " bytes at offset " << offset << ")";
  data = ArrayRef<char>(buffer->getBufferStart() + offset, bytes);
  return success();
}

FailureOr<Value> ModelImporter::importTensor(const onnx::TensorProto &tensor,
                                             Location loc) {
  Type elem = elementTypeFor(ctx_, tensor.data_type());
  if (!elem)
    return emitError(loc) << "tensor '" << tensor.name()
                          << "' has unsupported data type "
                          << tensor.data_type(),
           failure();
  SmallVector<int64_t> dims(tensor.dims().begin(), tensor.dims().end());
  auto type = RankedTensorType::get(dims, elem);
  std::string problem = graph::tensorSizeProblem(type);
  if (!problem.empty())
    return emitError(loc) << "tensor '" << tensor.name() << "' " << problem,
           failure();
  rt::TensorType rtType = toTensorType(type);
  size_t bytes = rtType.byteSize(), n = rtType.numElements(),
         es = rt::dtypeSize(rtType.dtype);

  ArrayRef<char> data;
  std::vector<uint8_t> converted;
  bool external = tensor.data_location() == onnx::TensorProto::EXTERNAL;
  if (external) {
    if (failed(readExternal(tensor, bytes, loc, data)))
      return failure();
  } else if (tensor.has_raw_data()) {
    if (tensor.raw_data().size() != bytes)
      return emitError(loc) << "tensor '" << tensor.name() << "' has "
                            << tensor.raw_data().size()
                            << " bytes of raw data, expected " << bytes,
             failure();
    data = ArrayRef<char>(tensor.raw_data().data(), bytes);
  } else {
    auto fill = [&](const auto &field) -> LogicalResult {
      // Counted before allocating: the dims may claim far more than the
      // file holds.
      if (static_cast<size_t>(field.size()) != n)
        return emitError(loc) << "tensor '" << tensor.name() << "' has "
                              << field.size() << " values, expected " << n;
      converted.assign(bytes, 0);
      for (size_t i = 0; i < n; ++i) {
        auto v = field.Get(static_cast<int>(i));
        if (elem.isInteger(1)) {
          converted[i] = v != 0;
          continue;
        }
        std::memcpy(converted.data() + i * es, &v, std::min(es, sizeof(v)));
      }
      return success();
    };
    LogicalResult ok = success();
    switch (rtType.dtype) {
    case rt::DType::F32:
      ok = fill(tensor.float_data());
      break;
    case rt::DType::F64:
      ok = fill(tensor.double_data());
      break;
    case rt::DType::I64:
      ok = fill(tensor.int64_data());
      break;
    case rt::DType::U32:
    case rt::DType::U64:
      ok = fill(tensor.uint64_data());
      break;
    default:
      ok = fill(tensor.int32_data());
      break;
    }
    if (failed(ok))
      return failure();
    data = ArrayRef<char>(reinterpret_cast<const char *>(converted.data()),
                          converted.size());
  }

  ElementsAttr value;
  // Large weights become resource blobs: no uniquing hash over the data.
  if (bytes >= 4096 && !elem.isInteger(1)) {
    std::string blobName = tensor.name().empty() ? "weight" : tensor.name();
    // Copied: the protobuf and the external files are released after import.
    AsmResourceBlob blob =
        HeapAsmResourceBlob::allocateAndCopyWithAlign(data, 64);
    value = DenseResourceElementsAttr::get(type, blobName, std::move(blob));
  } else {
    value = bytesToElements(
        type, ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(data.data()),
                                data.size()));
  }
  return Value(graph::ConstantOp::create(builder_, loc, type, value));
}

FailureOr<RankedTensorType>
ModelImporter::inputType(const onnx::ValueInfoProto &info) {
  Location loc = NameLoc::get(StringAttr::get(ctx_, info.name()), fileLoc());
  if (!info.type().has_tensor_type())
    return emitError(loc) << "graph input '" << info.name()
                          << "' is not a tensor",
           failure();
  const auto &tt = info.type().tensor_type();
  Type elem = elementTypeFor(ctx_, tt.elem_type());
  if (!elem)
    return emitError(loc) << "graph input '" << info.name()
                          << "' has unsupported element type "
                          << tt.elem_type(),
           failure();
  if (!tt.has_shape())
    return emitError(loc) << "graph input '" << info.name()
                          << "' has no shape; partc needs static shapes",
           failure();
  SmallVector<int64_t> dims;
  int rank = tt.shape().dim_size();
  auto isStatic = [&](int i) {
    const auto &d = tt.shape().dim(i);
    return d.has_dim_value() && d.dim_value() >= 0;
  };
  if (auto shape = options_.shapes.find(info.name());
      shape != options_.shapes.end()) {
    if (static_cast<int>(shape->second.size()) != rank)
      return emitError(loc) << "--shape " << info.name() << " gives "
                            << shape->second.size()
                            << " dimension(s), but the input has rank " << rank,
             failure();
    for (int i = 0; i < rank; ++i) {
      int64_t given = shape->second[i], fixed = tt.shape().dim(i).dim_value();
      if (given < 1 || (isStatic(i) && fixed != given))
        return emitError(loc)
                   << "--shape " << info.name() << " sets dimension " << i
                   << " to " << given << ", but "
                   << (given < 1
                           ? std::string("sizes must be positive")
                           : "the model fixes it at " + std::to_string(fixed)),
               failure();
      dims.push_back(given);
    }
  } else {
    for (int i = 0; i < rank; ++i) {
      const auto &d = tt.shape().dim(i);
      auto bound = options_.dims.find(d.dim_param());
      if (isStatic(i)) {
        dims.push_back(d.dim_value());
      } else if (!d.dim_param().empty() && bound != options_.dims.end()) {
        dims.push_back(bound->second);
      } else if (i == 0) {
        dims.push_back(options_.batch);
      } else {
        std::string name = d.dim_param().empty() ? std::string("unnamed")
                                                 : "'" + d.dim_param() + "'";
        return emitError(loc)
                   << "graph input '" << info.name()
                   << "' has dynamic dimension " << i << " (" << name
                   << "); bind it with "
                   << (d.dim_param().empty()
                           ? std::string()
                           : "--dim " + d.dim_param() + "=N or ")
                   << "--shape " << info.name() << "=D0x...xD" << rank - 1
                   << " (only a leading dimension defaults to --batch)",
               failure();
      }
    }
  }
  if (rank > 0 && !isStatic(0) && !leadingDim_)
    leadingDim_ = dims.front();
  auto type = RankedTensorType::get(dims, elem);
  std::string problem = graph::tensorSizeProblem(type);
  if (!problem.empty())
    return emitError(loc) << "graph input '" << info.name() << "' " << problem,
           failure();
  return type;
}

/// A --dim or --shape that binds nothing is a typo the user should hear
/// of: name what the model's inputs leave dynamic.
LogicalResult ModelImporter::checkBindingsUsed(const onnx::GraphProto &g) {
  std::set<std::string> dynamic, inputs;
  for (const auto &in : g.input()) {
    inputs.insert(in.name());
    if (in.type().has_tensor_type() && in.type().tensor_type().has_shape())
      for (const auto &d : in.type().tensor_type().shape().dim())
        if (!(d.has_dim_value() && d.dim_value() >= 0) &&
            !d.dim_param().empty())
          dynamic.insert(d.dim_param());
  }
  std::string known;
  for (const std::string &name : dynamic)
    known += (known.empty() ? "'" : ", '") + name + "'";
  for (const auto &[name, value] : options_.dims)
    if (!dynamic.count(name))
      return emitError(fileLoc())
                 << "--dim " << name << "=" << value
                 << " names no dynamic dimension of the model's inputs; "
                 << (known.empty() ? std::string("they have none with a name")
                                   : "their named ones are " + known),
             failure();
  for (const auto &entry : options_.shapes)
    if (!inputs.count(entry.first))
      return emitError(fileLoc()) << "--shape names '" << entry.first
                                  << "', which is not an input of the model",
             failure();
  return success();
}

/// Every unsupported op of `g`, reported at once with its nodes.
LogicalResult ModelImporter::checkSupported(const onnx::GraphProto &g) {
  const auto &handlers = onnxNodeHandlers();
  std::map<std::string, std::vector<std::string>> unsupported;
  for (int i = 0; i < g.node_size(); ++i) {
    const auto &node = g.node(i);
    bool defaultDomain = node.domain().empty() || node.domain() == "ai.onnx";
    if (!defaultDomain || !handlers.count(node.op_type())) {
      std::string type =
          defaultDomain ? node.op_type() : node.domain() + "." + node.op_type();
      unsupported[type].push_back(node.name().empty() ? "#" + std::to_string(i)
                                                      : node.name());
    }
  }
  if (!unsupported.empty()) {
    auto diag = emitError(fileLoc()) << "has " << unsupported.size()
                                     << " unsupported operator type(s):";
    for (auto &[type, nodes] : unsupported) {
      diag << " " << type << " (";
      for (size_t i = 0; i < nodes.size() && i < 5; ++i)
        diag << (i ? ", " : "") << "'" << nodes[i] << "'";
      if (nodes.size() > 5)
        diag << ", and " << nodes.size() - 5 << " more";
      diag << ");";
    }
    return failure();
  }
  return success();
}

OwningOpRef<ModuleOp> ModelImporter::run() {
  ctx_->loadDialect<graph::GraphDialect, func::FuncDialect>();
  onnx::ModelProto model;
  if (failed(load(model)))
    return nullptr;

  int64_t opset = -1;
  for (const auto &os : model.opset_import()) {
    if (os.domain().empty() || os.domain() == "ai.onnx")
      opset = os.version();
  }
  // Legacy broadcasting (opsets 1-6) is translated; other old attributes
  // such as consumed_inputs are ignored, as they do not change results.
  if (opset < 1 || opset > 23)
    return emitError(fileLoc())
               << "uses default-domain opset " << opset
               << "; partc supports opsets 1 through 23 (convert the model "
                  "with onnx.version_converter)",
           nullptr;

  const onnx::GraphProto &g = model.graph();
  if (failed(checkSupported(g)))
    return nullptr;

  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc());
  builder_.setInsertionPointToEnd(module->getBody());

  llvm::StringSet<> initializerNames;
  for (const auto &t : g.initializer())
    initializerNames.insert(t.name());
  SmallVector<Type> argTypes;
  SmallVector<std::string> argNames;
  std::set<std::string> unusedFrozen;
  for (const auto &entry : options_.constantInputs)
    unusedFrozen.insert(entry.first);
  if (failed(checkBindingsUsed(g)))
    return nullptr;
  for (const auto &in : g.input()) {
    if (initializerNames.contains(in.name()))
      continue;
    if (options_.constantInputs.count(in.name())) {
      unusedFrozen.erase(in.name());
      continue;
    }
    auto type = inputType(in);
    if (failed(type))
      return nullptr;
    argTypes.push_back(*type);
    argNames.push_back(in.name());
  }
  // A --batch the model cannot take would otherwise be ignored silently.
  if (options_.batchGiven && !leadingDim_) {
    auto leading = [](Type type) {
      auto ranked = cast<RankedTensorType>(type);
      return ranked.getRank() > 0 ? ranked.getDimSize(0) : int64_t{-1};
    };
    auto first =
        llvm::find_if(argTypes, [&](Type t) { return leading(t) >= 0; });
    if (first != argTypes.end() && llvm::none_of(argTypes, [&](Type t) {
          return leading(t) == options_.batch;
        }))
      return emitError(fileLoc())
                 << "--batch " << options_.batch
                 << " cannot apply: the model fixes every input's leading "
                    "dimension (input '"
                 << argNames[first - argTypes.begin()] << "' has "
                 << leading(*first)
                 << "); export it with a dynamic batch axis or compile "
                    "without --batch",
             nullptr;
  }

  auto func = func::FuncOp::create(builder_, fileLoc(), "main",
                                   builder_.getFunctionType(argTypes, {}));
  Block *body = func.addEntryBlock();
  builder_.setInsertionPointToStart(body);
  for (auto [i, name] : llvm::enumerate(argNames)) {
    values_[name] = body->getArgument(i);
    func.setArgAttr(i, graph::GraphDialect::kNameAttrName,
                    builder_.getStringAttr(name));
  }
  if (!unusedFrozen.empty())
    return emitError(fileLoc())
               << "--const-input names '" << *unusedFrozen.begin()
               << "', which is not a graph input",
           nullptr;
  for (const auto &t : g.initializer()) {
    Location loc = NameLoc::get(StringAttr::get(ctx_, t.name()), fileLoc());
    auto v = importTensor(t, loc);
    if (failed(v))
      return nullptr;
    // Training needs to know which constants are the model's parameters.
    if (auto constant = v->getDefiningOp<graph::ConstantOp>())
      constant->setAttr(graph::GraphDialect::kInitializerAttrName,
                        builder_.getStringAttr(t.name()));
    values_[t.name()] = *v;
  }
  for (const auto &[name, file] : options_.constantInputs) {
    Location loc = NameLoc::get(StringAttr::get(ctx_, name), fileLoc());
    rt::HostTensor tensor;
    rt::Status s = rt::readTensorFile(file, tensor, rt::kMaxTensorBytes);
    if (!s.ok())
      return emitError(loc) << "--const-input: " << s.message(), nullptr;
    Type elem = fromDType(ctx_, tensor.type.dtype);
    if (!elem)
      return emitError(loc)
                 << "--const-input: unsupported type " << tensor.type.str(),
             nullptr;
    auto type = RankedTensorType::get(tensor.type.shape, elem);
    values_[name] = graph::ConstantOp::create(
        builder_, loc, type, bytesToElements(type, tensor.data));
  }

  llvm::StringSet<> readNames;
  for (const auto &node : g.node())
    for (const auto &name : node.input())
      readNames.insert(name);
  for (const auto &out : g.output())
    readNames.insert(out.name());
  for (int i = 0; i < g.node_size(); ++i) {
    const auto &node = g.node(i);
    Location loc = nodeLoc(node, i);
    SmallVector<Value> inputs;
    for (const auto &name : node.input()) {
      if (name.empty()) {
        inputs.push_back(Value());
        continue;
      }
      auto it = values_.find(name);
      if (it == values_.end())
        return emitError(loc) << node.op_type() << ": input '" << name
                              << "' is not defined before this node (the "
                                 "graph must be topologically sorted)",
               nullptr;
      inputs.push_back(it->second);
    }
    NodeImporter importer(builder_, node, loc, opset, inputs,
                          options_.keepParameters);
    // A Constant node's tensor attribute is imported like an initializer.
    if (node.op_type() == "Constant") {
      if (const auto *a = importer.attr("value")) {
        auto v = importTensor(a->t(), loc);
        if (failed(v))
          return nullptr;
        importer.results.push_back(*v);
      }
    }
    if (importer.results.empty() &&
        failed(onnxNodeHandlers().lookup(node.op_type())(importer)))
      return nullptr;
    for (int o = 0; o < node.output_size(); ++o) {
      if (node.output(o).empty())
        continue;
      // An output a node may leave unset (batch norm's statistics) only
      // matters if something reads it.
      if (static_cast<size_t>(o) >= importer.results.size() ||
          !importer.results[o]) {
        if (!readNames.contains(node.output(o)))
          continue;
        return emitError(loc)
                   << node.op_type() << ": output " << o << " ('"
                   << node.output(o)
                   << "') is read by the graph but not supported by partc",
               nullptr;
      }
      values_[node.output(o)] = importer.results[o];
    }
  }

  SmallVector<Value> results;
  SmallVector<Type> resultTypes;
  for (const auto &out : g.output()) {
    auto it = values_.find(out.name());
    if (it == values_.end())
      return emitError(fileLoc())
                 << "graph output '" << out.name() << "' is never produced",
             nullptr;
    results.push_back(it->second);
    resultTypes.push_back(it->second.getType());
  }
  func::ReturnOp::create(builder_, fileLoc(), results);
  func.setFunctionType(builder_.getFunctionType(argTypes, resultTypes));
  for (auto [i, out] : llvm::enumerate(g.output()))
    func.setResultAttr(i, graph::GraphDialect::kNameAttrName,
                       builder_.getStringAttr(out.name()));
  module->getOperation()->setAttr("graph.opset",
                                  builder_.getI64IntegerAttr(opset));
  // The plan's metadata names the model and the batch it was compiled for.
  module->getOperation()->setAttr(
      "graph.model",
      builder_.getStringAttr(llvm::sys::path::filename(path_).str()));
  module->getOperation()->setAttr(
      "graph.batch",
      builder_.getI64IntegerAttr(leadingDim_.value_or(options_.batch)));
  return module;
}

} // namespace

OwningOpRef<ModuleOp> importOnnxFile(MLIRContext *context,
                                     const std::string &path,
                                     const ImportOptions &options) {
  ModelImporter importer(context, path, options);
  return importer.run();
}

OwningOpRef<ModuleOp> importOnnxBuffer(MLIRContext *context,
                                       llvm::StringRef contents,
                                       const std::string &path,
                                       const ImportOptions &options) {
  ModelImporter importer(context, path, options, contents);
  return importer.run();
}

std::vector<std::string> supportedOnnxOps() {
  std::vector<std::string> names;
  for (const auto &entry : onnxNodeHandlers())
    names.push_back(entry.getKey().str());
  std::sort(names.begin(), names.end());
  return names;
}

} // namespace mlir::partc::onnx_import

//===- OpCost.cpp - Roofline op costs -------------------------------------===//
#include "compiler/CostModel/OpCost.h"

#include "dialects/Graph/GraphOps.h"
#include "dialects/Graph/RuntimeBridge.h"
#include "runtime/kernels/Kernel.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>

namespace partc::costmodel {

using namespace mlir;
using namespace mlir::partc;

static double bytesOf(Type t) {
  auto shaped = dyn_cast<ShapedType>(t);
  if (!shaped || !shaped.hasStaticShape())
    return 0;
  return static_cast<double>(toTensorType(shaped).byteSize());
}

OpWork analyzeOp(Operation *op, bool batched) {
  OpWork w;
  w.batched = batched;
  // A concatenation read in place by its chain (partc-fuse-concat) moves
  // nothing: the chain is charged its parts' bytes.
  auto concat = dyn_cast<graph::ConcatOp>(op);
  if (isa<graph::ReshapeOp, graph::IdentityOp>(op) ||
      (concat && graph::concatReader(concat))) {
    w.cls = OpClass::View;
    return w;
  }
  if (isa<graph::ConvOp, graph::MatMulOp, graph::GemmOp, graph::StridedMatMulOp,
          graph::ConvGradInputOp, graph::ConvGradWeightOp>(op))
    w.cls = OpClass::Matrix;
  else if (isa<graph::TransposeOp, graph::ConcatOp, graph::SplitOp,
               graph::SliceOp, graph::GatherOp, graph::PadOp, graph::ExpandOp,
               graph::TransferOp>(op))
    w.cls = OpClass::Movement;
  // Few input channels fill little of the tensor cores' reduction tile
  // (ResNet's 3-channel stem); the gradients share the forward's filter.
  std::optional<ArrayRef<int64_t>> weight;
  bool channelsLast = op->hasAttr("channels_last");
  if (auto conv = dyn_cast<graph::ConvOp>(op))
    weight = cast<RankedTensorType>(conv.getWeight().getType()).getShape();
  else if (auto grad = dyn_cast<graph::ConvGradInputOp>(op))
    weight = cast<RankedTensorType>(grad.getWeight().getType()).getShape();
  else if (auto grad = dyn_cast<graph::ConvGradWeightOp>(op))
    weight = grad.getWeightShape();
  if (weight) {
    int64_t channels = channelsLast ? weight->back() : (*weight)[1];
    int64_t widened = std::max<int64_t>(4, (channels + 3) / 4 * 4);
    w.matrixUtilization = std::min(1.0, static_cast<double>(widened) / 32.0);
  }
  if (auto cost = dyn_cast<graph::CostOpInterface>(op))
    w.flops = static_cast<double>(cost.estimateFlops());
  auto strided = dyn_cast<graph::StridedMatMulOp>(op);
  for (OpOperand &operand : op->getOpOperands()) {
    Value v = operand.get();
    double b = bytesOf(v.getType());
    // A strided matmul reads only what its views cover.
    if (strided)
      b = static_cast<double>(strided.viewBytes(operand.getOperandNumber()));
    if (v.getDefiningOp<graph::ConstantOp>())
      w.weightBytes += b;
    else
      w.activationBytes += b;
  }
  for (Type t : op->getResultTypes()) {
    w.outputBytes += bytesOf(t);
    w.activationBytes += bytesOf(t);
  }
  std::vector<::partc::runtime::TensorType> ins, outs;
  for (Value v : op->getOperands()) {
    ins.push_back(toTensorType(cast<ShapedType>(v.getType())));
    Type element = cast<ShapedType>(v.getType()).getElementType();
    w.sixteenBit = w.sixteenBit || element.isBF16() || element.isF16();
    w.inputIsWeight.push_back(v.getDefiningOp<graph::ConstantOp>() != nullptr);
  }
  for (Type t : op->getResultTypes())
    outs.push_back(toTensorType(cast<ShapedType>(t)));
  w.kernel = kernelNameFor(op);
  w.attrs = toKernelAttrs(op);
  // A chain that will read a concatenation's parts (partc-fuse-concat,
  // after placement) is profiled under that kernel's signature.
  if (auto chain = dyn_cast<graph::FusedElementwiseOp>(op))
    for (Value v : chain.getInputs())
      if (auto source = v.getDefiningOp<graph::ConcatOp>();
          source && graph::concatReader(source) == chain) {
        SmallVector<Value> operands;
        SmallVector<int64_t> args;
        graph::concatPartsOperands(source, chain, operands, args);
        ins.clear();
        w.inputIsWeight.clear();
        for (Value operand : operands) {
          ins.push_back(toTensorType(cast<ShapedType>(operand.getType())));
          w.inputIsWeight.push_back(
              operand.getDefiningOp<graph::ConstantOp>() != nullptr);
        }
        w.attrs.set("args", ::partc::runtime::AttrValue::ofInts(
                                {args.begin(), args.end()}));
        w.attrs.set("concat_parts",
                    ::partc::runtime::AttrValue::ofInts(
                        {static_cast<int64_t>(source.getInputs().size())}));
        break;
      }
  w.signature = ::partc::runtime::kernelSignature(w.kernel, w.attrs, ins, outs);
  w.inputs = std::move(ins);
  w.outputs = std::move(outs);
  return w;
}

std::string OpWork::signatureAt(int64_t batch, int64_t slice) const {
  auto resize = [&](std::vector<::partc::runtime::TensorType> types,
                    const std::vector<bool> &weight) {
    for (size_t i = 0; i < types.size(); ++i)
      if ((i >= weight.size() || !weight[i]) && !types[i].shape.empty() &&
          types[i].shape[0] == batch)
        types[i].shape[0] = slice;
    return types;
  };
  return ::partc::runtime::kernelSignature(
      kernel, attrs, resize(inputs, inputIsWeight), resize(outputs, {}));
}

double predictSeconds(const OpWork &w, double fraction, const DeviceSpec &d,
                      bool tf32, const CostTable *table, int64_t batch,
                      int64_t slice) {
  if (w.cls == OpClass::View)
    return 0;
  double f = w.batched ? fraction : 1.0;
  if (table && w.batched && slice > 0 && slice != batch)
    if (const double *measured = table->lookup(w.signatureAt(batch, slice)))
      return *measured + d.kernelGapSeconds;
  double flops = w.flops * f;
  double bytes = w.activationBytes * f + w.weightBytes;
  double rate = w.cls == OpClass::Matrix
                    ? (w.sixteenBit && d.matrixFlopsBf16 > 0 ? d.matrixFlopsBf16
                       : tf32                                ? d.matrixFlopsTf32
                              : d.matrixFlopsFp32) *
                          w.matrixUtilization
                    : d.vectorFlops;
  double compute = w.cls == OpClass::Movement ? 0 : flops / rate;
  double memory = bytes / d.memoryBytesPerSecond;
  double roofline = std::max(compute, memory) + d.launchSeconds;
  // A measured full-batch time scaled linearly to a micro-batch ignores the
  // fixed costs that dominate small kernels; the roofline with its launch
  // cost bounds it from below, so tiny micro-batches never look free.
  if (table)
    if (const double *measured = table->lookup(w.signature))
      return f < 1.0 ? std::max(*measured * f + d.kernelGapSeconds, roofline)
                     : *measured + d.kernelGapSeconds;
  return roofline;
}

llvm::Error CostTable::load(const std::string &path) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return llvm::createStringError("cannot read cost table '" + path +
                                   "': " + buffer.getError().message());
  auto json = llvm::json::parse((*buffer)->getBuffer());
  if (!json)
    return llvm::createStringError("cost table '" + path + "' is not JSON: " +
                                   llvm::toString(json.takeError()));
  const llvm::json::Object *root = json->getAsObject();
  const llvm::json::Array *kernels = root ? root->getArray("kernels") : nullptr;
  if (!kernels)
    return llvm::createStringError("cost table '" + path +
                                   "' needs a \"kernels\" array");
  for (const llvm::json::Value &v : *kernels) {
    const llvm::json::Object *o = v.getAsObject();
    auto sig = o ? o->getString("signature") : std::nullopt;
    auto sec = o ? o->getNumber("seconds") : std::nullopt;
    if (!sig || !sec || *sec < 0)
      return llvm::createStringError(
          "cost table '" + path +
          "': each kernel needs \"signature\" and non-negative \"seconds\"");
    // Several instances of one signature: keep the mean of their times.
    int &count = counts_[sig->str()];
    double &mean = seconds_[sig->str()];
    mean = (mean * count + *sec) / (count + 1);
    ++count;
  }
  return llvm::Error::success();
}

} // namespace partc::costmodel

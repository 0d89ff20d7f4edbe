//===- OpCost.cpp - Roofline op costs -------------------------------------===//
#include "compiler/CostModel/OpCost.h"

#include "dialects/Graph/AttentionMatch.h"
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

/// The share of the matrix rate fused attention reaches, and the share of
/// its products a causal mask leaves. 16-bit: cuDNN's sm90 kernel with
/// the mask read at its own shape (session 36), on one H200 (session 38
/// profiles, times 1.17 for the sustained step's clock, less the fixed
/// cost): BERT-large 16 x 384 42.2 us a layer and 4 x 384 14.8 (0.39 and
/// 0.44 of the bf16 rate; 0.29 in session 32 on an H100, when the kernel
/// read the mask broadcast to every head and query); GPT-2 medium 8 x 512,
/// causal, 30 us, 0.8 of the full products' work at 0.39 (blocks on the
/// diagonal are computed whole). f32: partc's TF32
/// kernel on one H200 (session 36), which takes two tiles of queries a
/// warp where it can (64-wide heads or narrower, 256 queries or more, no
/// causal mask): 0.37 of the TF32 rate (BERT-large, 2.18 ms), else one,
/// 0.28 (GPT-2 medium, causal, 2.09 ms with the 0.8 share; BERT-large on
/// one tile 2.79 ms, 0.29).
constexpr double kAttentionUtilization16 = 0.39;
constexpr double kAttentionUtilizationF32 = 0.28;
constexpr double kAttentionUtilizationF32TwoTiles = 0.37;
constexpr double kCausalAttentionShare = 0.8;
/// 16-bit products (cuBLASLt's GEMMs) against the preset's matrix rate,
/// whose 0.6 of the peak was fitted to ResNet-50's convolutions:
/// BERT-large's bf16 products ran 3.71 TFLOP in 5.19 ms on an H100
/// (session 31), 0.72 of the bf16 peak; with this share BERT-large (a
/// torch 1.13 replica whose predictions match the export's) is predicted
/// at 8.14 ms against 7.75 measured on an H200 (session 32; 9.18 without
/// it). TF32 products reach about the preset's
/// rate (0.64 of the peak), so f32 keeps it.
constexpr double kSixteenBitProductShare = 1.2;
/// Fixed costs, as shares of the preset's launchSeconds (7 us on the GPU
/// presets, fitted to ResNet-50's convolutions at batches 64 and 16, where
/// it also absorbs their waves at the small batch). BERT-large's profiles
/// at batches 4 and 16 (H200, session 38) show less: cuBLASLt's 16-bit
/// GEMMs take about 3.2 us more than their FLOPs at the marginal rate
/// (the intercept across the two batches; 3.7 at the sustained clock),
/// TF32 ones about 7; a layer norm streams its rows at bandwidth with
/// about 2 us beside (3.1 us for 6 MB, 5.5 for 25 MB).
constexpr double kSixteenBitProductFixedShare = 0.5;
/// 16-bit convolutions reach less of the bf16 rate than TF32 ones of the
/// TF32 rate, with less fixed cost: fitted to ResNet-50 in bf16 on an H200
/// at batches 64 and 16 (2.22-2.27 and 0.75-0.78 ms measured, sessions
/// 27-37; predicted 1.94 and 0.80 with the f32 fit, 2.23 and 0.77 with
/// this one). DenseNet-121 b32 goes from +7% to about -2%, Inception v3
/// b32 from -3% to about -1% (session 39, torchvision exports).
constexpr double kSixteenBitConvShare = 0.65;
constexpr double kSixteenBitConvFixedShare = 0.6;
constexpr double kRowNormalizationFixedShare = 0.3;
/// Depthwise convolutions (one filter per channel) run on partc's own
/// CUDA-core kernel, bound by issuing its integer and load instructions:
/// fitted to its fastest form on the 26 depthwise layers of
/// EfficientNet-B0, MobileNetV3-L and ConvNeXt-T at batch 64 on an H200
/// (bench/depthwise_forms.cu, session 44), a layer takes (2 K^2 + 27 S)
/// flops an output element (K x K filter, stride S) at 11 TFLOP/s in bf16
/// and f32 alike (mean error 17% a layer), 0.17 of the preset's vector
/// rate.
constexpr double kDepthwiseOverheadFlops = 27;
constexpr double kDepthwiseVectorShare = 0.17;
/// Data movement kernels (transpose, slice, expand, gather, pad, split,
/// concatenation) are a single pass over their bytes, with nothing of a
/// GEMM's or convolution's ramp. Llama 170M's (16 x 256, H200, session 41)
/// took 0.9 to 6 us against 2 to 5.5 us of bytes, so 7 us of launch
/// charged 2 to 3x their time; this share leaves the 2.5 us a graph
/// spends between kernels: 2.45 us.
constexpr double kMovementFixedShare = 0.35;

/// Whether `softmax` sits between attention's two products.
static bool isAttentionSoftmax(graph::SoftmaxOp softmax) {
  if (!softmax->hasOneUse())
    return false;
  auto weighted = dyn_cast<graph::StridedMatMulOp>(*softmax->user_begin());
  return weighted && weighted.getLhs() == softmax.getResult() &&
         graph::matchAttention(weighted).has_value();
}

/// Charges attention's last product, as analyzed, the fused kernel's work:
/// both products' FLOPs (a share of them under a causal mask) at the
/// attention kernels' share of the matrix rate, and the bytes of q, k, v,
/// the mask and the result (the scores never reach memory).
/// Returns whether the mask is proved causal.
static bool chargeFusedAttention(graph::AttentionMatch m, OpWork &w) {
  auto flopsOf = [](Operation *op) {
    return static_cast<double>(
        cast<graph::CostOpInterface>(op).estimateFlops());
  };
  w.flops = flopsOf(m.scores) + flopsOf(m.weighted);
  auto scoresType = cast<RankedTensorType>(m.scores.getType());
  int64_t rank = scoresType.getRank();
  bool causal = graph::masksAboveDiagonal(m.softmax.getBias(),
                                          scoresType.getDimSize(rank - 2),
                                          scoresType.getDimSize(rank - 1));
  if (causal)
    w.flops *= kCausalAttentionShare;
  w.activationBytes =
      static_cast<double>(m.scores.viewBytes(0) + m.scores.viewBytes(1) +
                          m.weighted.viewBytes(1)) +
      w.outputBytes;
  w.weightBytes = 0;
  // Read at the shape that holds all it says (a padding mask per key), or
  // not at all (a causal mask only).
  if (auto [bias, shape] = graph::fusedBias(m, causal); bias) {
    auto type = cast<RankedTensorType>(bias.getType());
    double b = bytesOf(RankedTensorType::get(shape, type.getElementType()));
    (bias.getDefiningOp<graph::ConstantOp>() ? w.weightBytes
                                             : w.activationBytes) += b;
  }
  int64_t queries = scoresType.getDimSize(rank - 2);
  bool twoTiles =
      !causal && queries >= 256 && m.scores.getLhsShape().back() <= 64;
  // cuDNN's attention keeps the whole fixed cost (about 6.5 us at the
  // sustained clock, the intercept across BERT-large's two batches).
  w.fixedShare = 1.0;
  w.matrixUtilization = w.sixteenBit ? kAttentionUtilization16
                        : twoTiles   ? kAttentionUtilizationF32TwoTiles
                                     : kAttentionUtilizationF32;
  return causal;
}

/// What a convolution's GPU kernels do beyond an implicit GEMM: a depthwise
/// one runs on the CUDA cores at the rate its kernel reaches
/// (kDepthwiseVectorShare); a SiLU after any other is a pass of its own
/// over the output (no library's epilogue computes it).
static void chargeConvolutionExtras(graph::ConvOp conv, OpWork &w) {
  auto weight = cast<RankedTensorType>(conv.getWeight().getType());
  ArrayRef<int64_t> shape = weight.getShape();
  int64_t perGroup = conv.getChannelsLast() ? shape.back() : shape[1];
  int64_t channels = shape[0];
  bool depthwise = perGroup == 1 && conv.getGroup() == channels &&
                   channels > 1 && !conv.getStrides().empty();
  if (depthwise) {
    double taps = 1, stride = 0;
    for (int64_t s : conv.getStrides())
      stride += static_cast<double>(s);
    stride /= static_cast<double>(conv.getStrides().size());
    ArrayRef<int64_t> spatial = conv.getChannelsLast()
                                    ? shape.drop_front().drop_back()
                                    : shape.drop_front(2);
    for (int64_t k : spatial)
      taps *= static_cast<double>(k);
    double outputs = static_cast<double>(
        cast<RankedTensorType>(conv.getType()).getNumElements());
    w.cls = OpClass::Vector;
    w.flops = outputs * (2 * taps + kDepthwiseOverheadFlops * stride);
    w.vectorUtilization = kDepthwiseVectorShare;
    return;
  }
  if (conv.getActivation() && *conv.getActivation() == "silu") {
    w.activationBytes += 2 * w.outputBytes;
    w.fixedShare += 1.0;
  }
}

OpWork analyzeOp(Operation *op, bool batched, bool fusedAttention) {
  OpWork w;
  w.batched = batched;
  // The first product and the softmax of attention that is fused after
  // placement are inside the kernel charged to its last product.
  if (fusedAttention) {
    auto product = dyn_cast<graph::StridedMatMulOp>(op);
    auto softmax = dyn_cast<graph::SoftmaxOp>(op);
    if ((product && graph::matchAttentionFromScores(product)) ||
        (softmax && isAttentionSoftmax(softmax))) {
      w.cls = OpClass::View;
      return w;
    }
  }
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
  // A slice reads its result's bytes of the input, a gather the rows it
  // picks of its table (an embedding table may be 200 MB, one row a token).
  bool readsWhatItWrites = isa<graph::SliceOp>(op);
  auto gather = dyn_cast<graph::GatherOp>(op);
  for (OpOperand &operand : op->getOpOperands()) {
    Value v = operand.get();
    double b = bytesOf(v.getType());
    // A strided matmul reads only what its views cover.
    if (strided)
      b = static_cast<double>(strided.viewBytes(operand.getOperandNumber()));
    if ((readsWhatItWrites && operand.getOperandNumber() == 0) ||
        (gather && v == gather.getData()))
      b = std::min(b, bytesOf(op->getResult(0).getType()));
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
  if (w.sixteenBit &&
      isa<graph::MatMulOp, graph::GemmOp, graph::StridedMatMulOp>(op)) {
    w.matrixUtilization = kSixteenBitProductShare;
    w.fixedShare = kSixteenBitProductFixedShare;
  }
  if (w.sixteenBit && isa<graph::ConvOp>(op)) {
    w.matrixUtilization *= kSixteenBitConvShare;
    w.fixedShare = kSixteenBitConvFixedShare;
  }
  if (auto conv = dyn_cast<graph::ConvOp>(op))
    chargeConvolutionExtras(conv, w);
  if (isa<graph::LayerNormOp, graph::RmsNormOp>(op))
    w.fixedShare = kRowNormalizationFixedShare;
  if (w.cls == OpClass::Movement && !isa<graph::TransferOp>(op))
    w.fixedShare = kMovementFixedShare;
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
  // Fused attention is profiled under the fused kernel's signature.
  if (auto product = dyn_cast<graph::StridedMatMulOp>(op);
      fusedAttention && product)
    if (std::optional<graph::AttentionMatch> match =
            graph::matchAttention(product)) {
      bool causal = chargeFusedAttention(*match, w);
      w.kernel = "attention";
      w.attrs = toKernelAttrs(graph::fusedAttentionAttributes(*match, causal));
      ins.clear();
      w.inputIsWeight.clear();
      auto [bias, biasShape] = graph::fusedBias(*match, causal);
      for (Value operand :
           {Value(match->scores.getLhs()), Value(match->scores.getRhs()),
            Value(match->weighted.getRhs()), bias}) {
        if (!operand)
          continue;
        ins.push_back(toTensorType(cast<ShapedType>(operand.getType())));
        w.inputIsWeight.push_back(operand.getDefiningOp<graph::ConstantOp>() !=
                                  nullptr);
      }
      // The fused op reads the bias at the shape that holds all it says.
      if (bias)
        ins.back().shape.assign(biasShape.begin(), biasShape.end());
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
                    : d.vectorFlops * w.vectorUtilization;
  double compute = w.cls == OpClass::Movement ? 0 : flops / rate;
  double memory = bytes / d.memoryBytesPerSecond;
  double roofline = std::max(compute, memory) + d.launchSeconds * w.fixedShare;
  // A measured full-batch time scaled linearly to a micro-batch ignores the
  // fixed costs that dominate small kernels; the roofline with its launch
  // cost bounds it from below, so tiny micro-batches never look free.
  if (table)
    if (const double *measured = table->lookup(w.signature))
      return f < 1.0 ? std::max(*measured * f + d.kernelGapSeconds, roofline)
                     : *measured + d.kernelGapSeconds;
  return roofline;
}

llvm::Error CostTable::loadAll(llvm::StringRef paths) {
  for (llvm::StringRef rest = paths; !rest.empty();) {
    auto [file, tail] = rest.split(',');
    rest = tail;
    if (llvm::Error e = load(file.str()))
      return e;
  }
  return llvm::Error::success();
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

//===- Kernel.cpp - Kernel registry and shared helpers --------------------===//
#include "runtime/kernels/KernelRegistry.h"

#include <initializer_list>
#include <utility>

namespace partc::runtime {

Kernel::~Kernel() = default;

namespace {

bool isSixteenBit(DType t) { return t == DType::F16 || t == DType::BF16; }

/// Runs an op on f16 or bf16 operands as a GPU kernel does: each 16-bit
/// operand widened to f32 (exact), the f32 kernel, each 16-bit result
/// rounded once to nearest even. The reference for plans compiled with
/// --precision.
class SixteenBitKernel : public Kernel {
public:
  SixteenBitKernel(std::unique_ptr<Kernel> f32, std::vector<TensorType> ins,
                   std::vector<TensorType> outs)
      : f32_(std::move(f32)), ins_(std::move(ins)), outs_(std::move(outs)) {}

  Status run(const std::vector<TensorRef> &inputs,
             const std::vector<TensorRef> &outputs) override {
    std::vector<TensorRef> wideIns = inputs, wideOuts = outputs;
    scratch_.resize(inputs.size() + outputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!isSixteenBit(inputs[i].type.dtype))
        continue;
      widen(inputs[i], scratch_[i]);
      wideIns[i] = {scratch_[i].data(), ins_[i]};
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (!isSixteenBit(outputs[i].type.dtype))
        continue;
      std::vector<float> &buffer = scratch_[inputs.size() + i];
      buffer.resize(outputs[i].type.numElements());
      // In-place updates read the output's old values.
      widen(outputs[i], buffer);
      wideOuts[i] = {buffer.data(), outs_[i]};
    }
    PARTC_RETURN_IF_ERROR(f32_->run(wideIns, wideOuts));
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (!isSixteenBit(outputs[i].type.dtype))
        continue;
      const std::vector<float> &buffer = scratch_[inputs.size() + i];
      auto *out = static_cast<uint16_t *>(outputs[i].data);
      bool bf16 = outputs[i].type.dtype == DType::BF16;
      for (size_t e = 0; e < buffer.size(); ++e)
        out[e] = bf16 ? floatToBf16(buffer[e]) : floatToHalf(buffer[e]);
    }
    return Status();
  }

private:
  static void widen(const TensorRef &t, std::vector<float> &out) {
    int64_t n = t.type.numElements();
    out.resize(n);
    auto *in = static_cast<const uint16_t *>(t.data);
    bool bf16 = t.type.dtype == DType::BF16;
    for (int64_t e = 0; e < n; ++e)
      out[e] = bf16 ? bf16ToFloat(in[e]) : halfToFloat(in[e]);
  }

  std::unique_ptr<Kernel> f32_;
  std::vector<TensorType> ins_, outs_;
  std::vector<std::vector<float>> scratch_;
};

} // namespace

static const KernelTable &kernelTable() {
  static const KernelTable table = [] {
    KernelTable t;
    registerElementwiseKernels(t);
    registerLinearAlgebraKernels(t);
    registerNnKernels(t);
    registerDataMovementKernels(t);
    registerAxisKernels(t);
    registerTrainingKernels(t);
    registerBackwardKernels(t);
    return t;
  }();
  return table;
}

Status createCpuKernel(const std::string &name, const AttrMap &attrs,
                       const std::vector<TensorType> &inputs,
                       const std::vector<TensorType> &outputs,
                       std::unique_ptr<Kernel> &result) {
  const KernelTable &table = kernelTable();
  auto it = table.find(name);
  if (it == table.end())
    return Status::error("no CPU kernel named '" + name + "'");
  for (const TensorType &t : inputs)
    if (dtypeSize(t.dtype) == 0)
      return Status::error("kernel '" + name + "' has an operand of type " +
                           t.str());
  // Casts convert 16-bit values themselves; every other op runs in f32
  // between conversions.
  bool sixteen = false;
  std::vector<TensorType> wideIns = inputs, wideOuts = outputs;
  for (std::vector<TensorType> *types : {&wideIns, &wideOuts})
    for (TensorType &t : *types)
      if (isSixteenBit(t.dtype) && name != "cast") {
        t.dtype = DType::F32;
        sixteen = true;
      }
  KernelArgs args{name, attrs, sixteen ? wideIns : inputs,
                  sixteen ? wideOuts : outputs};
  attrs.clearMissing();
  Status s = it->second(args, result);
  if (s.ok() && sixteen && result)
    result = std::make_unique<SixteenBitKernel>(
        std::move(result), std::move(wideIns), std::move(wideOuts));
  // A missing attribute is the cause of whatever else the factory found.
  if (!attrs.firstMissing().empty())
    s = missingAttribute(attrs);
  if (!s.ok()) {
    result.reset();
    return s.prepend("kernel '" + name + "'");
  }
  return s;
}

Status missingAttribute(const AttrMap &attrs) {
  if (attrs.firstMissing().empty())
    return Status();
  return Status::error("needs the attribute '" + attrs.firstMissing() +
                       "' (compile the model again with this partc)");
}

bool hasCpuKernel(const std::string &name) {
  return kernelTable().count(name) != 0;
}

std::vector<std::string> cpuKernelNames() {
  std::vector<std::string> names;
  for (const auto &entry : kernelTable())
    names.push_back(entry.first);
  return names;
}

Status checkArity(const KernelArgs &args, size_t minIn, size_t maxIn,
                  size_t nout) {
  if (args.inputs.size() < minIn || args.inputs.size() > maxIn)
    return Status::error("expects " + std::to_string(minIn) +
                         (maxIn != minIn ? ".." + std::to_string(maxIn) : "") +
                         " inputs, got " + std::to_string(args.inputs.size()));
  if (args.outputs.size() != nout)
    return Status::error("expects " + std::to_string(nout) + " outputs, got " +
                         std::to_string(args.outputs.size()));
  return Status();
}

std::vector<int64_t> contiguousStrides(const Shape &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

std::vector<int64_t> broadcastStrides(const Shape &in, const Shape &out) {
  std::vector<int64_t> inStrides = contiguousStrides(in);
  std::vector<int64_t> strides(out.size(), 0);
  size_t offset = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i)
    strides[offset + i] = in[i] == 1 ? 0 : inStrides[i];
  return strides;
}

std::string kernelSignature(const std::string &name, const AttrMap &attrs,
                            const std::vector<TensorType> &inputs,
                            const std::vector<TensorType> &outputs) {
  std::string s = name + "(";
  for (size_t i = 0; i < inputs.size(); ++i)
    s += (i ? "," : "") + inputs[i].str();
  s += ")->(";
  for (size_t i = 0; i < outputs.size(); ++i)
    s += (i ? "," : "") + outputs[i].str();
  s += ")";
  for (const auto &[key, v] : attrs.entries()) {
    s += " " + key + "=";
    if (v.kind == AttrValue::Kind::String) {
      s += v.str;
      continue;
    }
    const size_t n =
        v.kind == AttrValue::Kind::Ints ? v.ints.size() : v.floats.size();
    for (size_t i = 0; i < n; ++i) {
      s += i ? ":" : "";
      s += v.kind == AttrValue::Kind::Ints ? std::to_string(v.ints[i])
                                           : std::to_string(v.floats[i]);
    }
  }
  return s;
}

bool isFloatType(DType t) { return t == DType::F32 || t == DType::F64; }

/// The `activation` attribute as one of `allowed` (none when absent).
static Status parseActivation(
    const AttrMap &attrs,
    std::initializer_list<std::pair<const char *, FusedActivation>> allowed,
    FusedActivation &activation) {
  std::string act = attrs.getString("activation", "");
  activation = FusedActivation::None;
  if (act.empty())
    return Status();
  for (const auto &[name, value] : allowed)
    if (act == name) {
      activation = value;
      return Status();
    }
  return Status::error("unsupported fused activation '" + act + "'");
}

Status fusedActivation(const AttrMap &attrs, FusedActivation &activation) {
  return parseActivation(attrs,
                         {{"relu", FusedActivation::Relu},
                          {"gelu_tanh", FusedActivation::GeluTanh}},
                         activation);
}

Status fusedConvActivation(const AttrMap &attrs, FusedActivation &activation) {
  return parseActivation(
      attrs, {{"relu", FusedActivation::Relu}, {"silu", FusedActivation::Silu}},
      activation);
}

Status fusedRelu(const AttrMap &attrs, bool &relu) {
  std::string act = attrs.getString("activation", "");
  relu = act == "relu";
  if (!act.empty() && !relu)
    return Status::error("unsupported fused activation '" + act + "'");
  return Status();
}

} // namespace partc::runtime

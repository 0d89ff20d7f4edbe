//===- Kernel.cpp - Kernel registry and shared helpers --------------------===//
#include "runtime/kernels/KernelRegistry.h"

namespace partc::runtime {

Kernel::~Kernel() = default;

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
  KernelArgs args{name, attrs, inputs, outputs};
  attrs.clearMissing();
  Status s = it->second(args, result);
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

Status fusedRelu(const AttrMap &attrs, bool &relu) {
  std::string act = attrs.getString("activation", "");
  relu = act == "relu";
  if (!act.empty() && !relu)
    return Status::error("unsupported fused activation '" + act + "'");
  return Status();
}

} // namespace partc::runtime

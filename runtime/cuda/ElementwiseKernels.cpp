//===- ElementwiseKernels.cpp - Element-wise GPU kernels ------------------===//
//
// The GPU side of runtime/kernels/Elementwise.cpp: unary and binary steps of
// ElementwiseOps.h, fused chains (generated per program, or interpreted),
// comparisons, logic, where, casts and float tests.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/ChainCodegen.h"
#include "runtime/cuda/CudaKernels.h"
#include "runtime/kernels/CopyLayout.h"
#include "runtime/kernels/Dispatch.h"
#include "runtime/kernels/FusedElementwise.h"
#include "runtime/kernels/KernelRegistry.h"

#include <limits>
#include <optional>

namespace partc::runtime::cuda {

namespace {

using Factory = GpuFactory;

class UnaryKernel : public GpuKernel {
public:
  UnaryKernel(ew::Step op, const double (&params)[2])
      : op_(op), p_(static_cast<float>(params[0])),
        q_(static_cast<float>(params[1])) {}
  Status run(DeviceContext &ctx, const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    return cudaStatus(launchUnaryF32(op_, in[0].as<float>(), out[0].as<float>(),
                                     in[0].type.numElements(), p_, q_,
                                     ctx.stream),
                      "unary kernel");
  }

private:
  ew::Step op_;
  float p_, q_;
};

/// Runs the code generated for its program where NVRTC compiled it, else
/// the interpreter.
class FusedElementwiseKernel : public GpuKernel {
public:
  FusedElementwiseKernel(const FusedParams &params,
                         const std::optional<GeneratedChain> &generated)
      : params_(params), generated_(generated) {}
  Status run(DeviceContext &ctx, const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    FusedParams p = params_;
    // The operands: input 0's parts (if it has any), then the inputs.
    size_t first = p.parts ? static_cast<size_t>(p.parts) - 1 : 0;
    for (int q = 0; q < p.parts; ++q)
      p.part[q] = in[q].data;
    for (size_t k = first; k < in.size(); ++k)
      p.in[k - first] = in[k].data;
    if (p.parts)
      p.in[0] = nullptr;
    p.out = out[0].data;
    return cudaStatus(generated_
                          ? launchGeneratedChain(*generated_, p, ctx.stream)
                          : launchFusedElementwise(p, ctx.stream),
                      "fused element-wise kernel");
  }

private:
  FusedParams params_;
  std::optional<GeneratedChain> generated_;
};

class BinaryKernel : public GpuKernel {
public:
  BinaryKernel(ew::Step op, Strides st, bool same, bool relu)
      : op_(op), st_(st), same_(same), relu_(relu) {}
  Status run(DeviceContext &ctx, const std::vector<TensorRef> &in,
             const std::vector<TensorRef> &out) override {
    return cudaStatus(launchBinaryF32(op_, in[0].as<float>(), in[1].as<float>(),
                                      out[0].as<float>(),
                                      out[0].type.numElements(), st_, same_,
                                      relu_, ctx.stream),
                      "binary kernel");
  }

private:
  ew::Step op_;
  Strides st_;
  bool same_, relu_;
};

/// out[i] = in[base + offset of i], the output contiguous, simplified by
/// CopyLayout.h: merged dimensions, and 16- or 8-byte elements where the
/// innermost run allows (a slice of whole rows, a transpose that keeps the
/// last axis) and the pointers are aligned.
/// IsNaN (`nan`) or IsInf of f32 elements.
Factory floatTest(bool nan) {
  return [nan](const KernelArgs &a, DeviceContext &,
               std::unique_ptr<GpuKernel> &k) -> Status {
    if (a.inputs[0].dtype != DType::F32)
      return Status();
    // IsNaN has no sign to detect; IsInf carries both flags.
    bool positive = nan || a.attrs.getInt("detect_positive") != 0,
         negative = nan || a.attrs.getInt("detect_negative") != 0;
    k = lambda([=](DeviceContext &ctx, const std::vector<TensorRef> &in,
                   const std::vector<TensorRef> &out) {
      return cudaStatus(launchFloatTest(in[0].as<float>(), out[0].as<bool>(),
                                        out[0].type.numElements(), nan,
                                        positive, negative, ctx.stream),
                        nan ? "is_nan" : "is_inf");
    });
    return Status();
  };
}

/// Every operand is f32, bf16 or f16 (steps compute in f32 in between).
bool allFloat32Or16(const KernelArgs &a) {
  for (const std::vector<TensorType> *types : {&a.inputs, &a.outputs})
    for (const TensorType &t : *types)
      if (t.dtype != DType::F32 && t.dtype != DType::BF16 &&
          t.dtype != DType::F16)
        return false;
  return true;
}

unsigned char fusedElement(DType t) {
  return t == DType::BF16  ? FusedParams::BF16
         : t == DType::F16 ? FusedParams::F16
                           : FusedParams::F32;
}

/// The fused element-wise kernel running `program` on f32 (or 16-bit) operands,
/// or none where its launch parameters cannot hold them (more than 2^31
/// elements, rank above kFusedMaxRank).
Status createFusedKernel(const KernelArgs &a, const fused::Program &program,
                         DeviceContext &ctx, std::unique_ptr<GpuKernel> &k) {
  static_assert(kFusedMaxSteps == fused::kMaxSteps &&
                    kFusedMaxInputs == fused::kMaxInputs &&
                    kFusedMaxRank == fused::kMaxRank,
                "the launch parameters hold any valid program");
  const Shape &out = a.outputs[0].shape;
  int64_t n = numElements(out);
  if (!allFloat32Or16(a) || n > std::numeric_limits<int32_t>::max() || n == 0 ||
      out.size() > static_cast<size_t>(kFusedMaxRank))
    return Status();
  int parts = 1;
  std::vector<TensorType> inputs;
  PARTC_RETURN_IF_ERROR(fused::programInputs(a.attrs, a.inputs, parts, inputs));
  if (inputs.size() > static_cast<size_t>(kFusedMaxInputs) ||
      (parts > 1 && inputs[0].shape != out))
    return Status::error("fused chain of " + std::to_string(inputs.size()) +
                         " inputs whose concatenation is " + inputs[0].str() +
                         " for a result of " + a.outputs[0].str());
  FusedParams p;
  for (size_t i = 0; i < inputs.size(); ++i)
    p.element[i] = fusedElement(inputs[i].dtype);
  p.outElement = fusedElement(a.outputs[0].dtype);
  p.steps = static_cast<int>(program.steps.size());
  p.inputs = static_cast<int>(inputs.size());
  p.n = static_cast<uint32_t>(n);
  if (parts > 1) {
    // Where each part starts along the innermost axis, and in the parts'
    // order (FusedChain.cuh: runFusedChainParts).
    p.parts = parts;
    int64_t rows = n / out.back();
    for (int q = 0; q < parts; ++q) {
      p.partStart[q + 1] =
          p.partStart[q] + static_cast<uint32_t>(a.inputs[q].shape.back());
      p.partBegin[q + 1] = static_cast<uint32_t>(rows * p.partStart[q + 1]);
    }
  }
  std::vector<Shape> inShapes;
  for (const TensorType &t : inputs)
    inShapes.push_back(t.shape);
  Shape collapsed;
  std::vector<std::vector<int64_t>> strides;
  collapseDims(out, inShapes, collapsed, strides);
  p.rank = static_cast<int>(collapsed.size());
  for (int s = 0; s < p.steps; ++s) {
    p.step[s] = static_cast<uint8_t>(program.steps[s]);
    p.lhs[s] = static_cast<int8_t>(program.lhs[s]);
    // Unary steps read their operand twice rather than garbage.
    p.rhs[s] = static_cast<int8_t>(
        ew::arity(program.steps[s]) == 2 ? program.rhs[s] : program.lhs[s]);
    for (int i = 0; i < 2; ++i)
      p.param[s][i] = static_cast<float>(program.params[s][i]);
  }
  for (int d = 0; d < p.rank; ++d)
    p.shape[d] = static_cast<uint32_t>(collapsed[d]);
  for (int i = 0; i < p.inputs; ++i) {
    const Shape &in = inputs[i].shape;
    p.mode[i] = i == 0 && parts > 1    ? FusedParams::Parts
                : in == out            ? FusedParams::Same
                : numElements(in) == 1 ? FusedParams::Scalar
                                       : FusedParams::Broadcast;
    for (int d = 0; d < p.rank; ++d)
      p.stride[i][d] = static_cast<uint32_t>(strides[i][d]);
  }
  std::optional<GeneratedChain> generated;
  if (ctx.options.generatedChains) {
    GeneratedChain chain;
    // Where NVRTC fails, the interpreter computes the same; the failure is
    // reported once (generatedChainStats).
    if (generateChain(p, ctx.gpu, chain).ok())
      generated = chain;
  }
  k = std::make_unique<FusedElementwiseKernel>(p, generated);
  return Status();
}

} // namespace

namespace {

/// One step (and a fused ReLU after it) as a fused chain: how a lone step
/// on 16-bit operands runs (the chain converts on load and store), and a
/// binary step with a scalar operand (read once per thread).
Status oneStepChain(const KernelArgs &a, ew::Step step,
                    const double (&params)[2], bool relu, DeviceContext &ctx,
                    std::unique_ptr<GpuKernel> &k) {
  fused::Program program;
  program.steps = {step};
  program.lhs = {0};
  program.rhs = {ew::arity(step) == 1 ? 0 : 1};
  program.params = {{params[0], params[1]}};
  if (relu) {
    program.steps.push_back(ew::Step::Relu);
    program.lhs.push_back(-1);
    program.rhs.push_back(-1);
    program.params.push_back({0, 0});
  }
  return createFusedKernel(a, program, ctx, k);
}

Factory binaryFactory(ew::Step op) {
  return [op](const KernelArgs &a, DeviceContext &ctx,
              std::unique_ptr<GpuKernel> &k) -> Status {
    const double noParams[2] = {0, 0};
    bool relu;
    PARTC_RETURN_IF_ERROR(fusedRelu(a.attrs, relu));
    if (!allF32(a))
      return allFloat32Or16(a) ? oneStepChain(a, op, noParams, relu, ctx, k)
                               : Status();
    const Shape &out = a.outputs[0].shape;
    if (out.size() > static_cast<size_t>(kMaxRank))
      return Status();
    bool same = a.inputs[0].shape == out && a.inputs[1].shape == out;
    auto plainOrScalar = [&](const Shape &in) {
      return in == out || numElements(in) == 1;
    };
    if (!same && plainOrScalar(a.inputs[0].shape) &&
        plainOrScalar(a.inputs[1].shape)) {
      // A scalar operand runs as a one-step fused chain: read once per
      // thread and the rest 16 bytes at a time. Other broadcasts index
      // through collapsed strides below, without the chain's
      // interpreter.
      PARTC_RETURN_IF_ERROR(oneStepChain(a, op, noParams, relu, ctx, k));
      if (k)
        return Status();
    }
    k = std::make_unique<BinaryKernel>(
        op, makeStrides(out, {a.inputs[0].shape, a.inputs[1].shape}), same,
        relu);
    return Status();
  };
}

Factory compareFactory(int code) {
  return [code](const KernelArgs &a, DeviceContext &,
                std::unique_ptr<GpuKernel> &k) -> Status {
    DType t = a.inputs[0].dtype;
    const Shape &out = a.outputs[0].shape;
    if ((t != DType::F32 && t != DType::I64 && t != DType::I32) ||
        out.size() > static_cast<size_t>(kMaxRank))
      return Status();
    Strides st = makeStrides(out, {a.inputs[0].shape, a.inputs[1].shape});
    k = lambda([=](DeviceContext &ctx, const std::vector<TensorRef> &in,
                   const std::vector<TensorRef> &o) {
      return cudaStatus(launchCompare(code, t, in[0].data, in[1].data,
                                      o[0].as<bool>(), o[0].type.numElements(),
                                      st, ctx.stream),
                        "compare");
    });
    return Status();
  };
}

Factory logicalFactory(int code) {
  return [code](const KernelArgs &a, DeviceContext &,
                std::unique_ptr<GpuKernel> &k) -> Status {
    const Shape &out = a.outputs[0].shape;
    for (const TensorType &t : a.inputs)
      if (t.dtype != DType::Bool)
        return Status();
    if (out.size() > static_cast<size_t>(kMaxRank))
      return Status();
    std::vector<Shape> shapes;
    for (const TensorType &t : a.inputs)
      shapes.push_back(t.shape);
    Strides st = makeStrides(out, shapes);
    k = lambda([=](DeviceContext &ctx, const std::vector<TensorRef> &in,
                   const std::vector<TensorRef> &o) {
      const bool *rhs = in.size() > 1 ? in[1].as<bool>() : nullptr;
      return cudaStatus(launchLogical(code, in[0].as<bool>(), rhs,
                                      o[0].as<bool>(), o[0].type.numElements(),
                                      st, ctx.stream),
                        "logical");
    });
    return Status();
  };
}

} // namespace

void registerElementwiseGpuKernels(GpuKernelTable &t) {
  // Every unary step of ElementwiseOps.h; gelu picks its step by its
  // approximation.
  Factory unary = [](const KernelArgs &a, DeviceContext &ctx,
                     std::unique_ptr<GpuKernel> &k) -> Status {
    ew::Step step;
    double params[2];
    PARTC_RETURN_IF_ERROR(fused::stepOfKernel(a.name, a.attrs, step, params));
    if (!allF32(a))
      return allFloat32Or16(a)
                 ? oneStepChain(a, step, params, /*relu=*/false, ctx, k)
                 : Status();
    k = std::make_unique<UnaryKernel>(step, params);
    return Status();
  };
  for (int i = 0; i < ew::kNumUnary; ++i)
    if (static_cast<ew::Step>(i) != ew::Step::GeluTanh)
      t[ew::kSteps[i].name] = unary;

  for (int i = ew::kNumUnary; i < ew::kNumSteps; ++i)
    t[ew::kSteps[i].name] = binaryFactory(static_cast<ew::Step>(i));

  t["fused_elementwise"] = [](const KernelArgs &a, DeviceContext &ctx,
                              std::unique_ptr<GpuKernel> &k) -> Status {
    int parts = 1;
    std::vector<TensorType> inputs;
    PARTC_RETURN_IF_ERROR(
        fused::programInputs(a.attrs, a.inputs, parts, inputs));
    fused::Program program;
    PARTC_RETURN_IF_ERROR(
        fused::parseProgram(a.attrs, static_cast<int>(inputs.size()), program));
    return createFusedKernel(a, program, ctx, k);
  };
  t["is_nan"] = floatTest(true);
  t["is_inf"] = floatTest(false);

  t["and"] = logicalFactory(0);
  t["or"] = logicalFactory(1);
  t["xor"] = logicalFactory(2);
  t["not"] = logicalFactory(3);
  t["equal"] = compareFactory(0);
  t["less"] = compareFactory(1);
  t["greater"] = compareFactory(2);
  t["less_or_equal"] = compareFactory(3);
  t["greater_or_equal"] = compareFactory(4);
  t["where"] = [](const KernelArgs &a, DeviceContext &,
                  std::unique_ptr<GpuKernel> &k) -> Status {
    const Shape &out = a.outputs[0].shape;
    size_t es = dtypeSize(a.outputs[0].dtype);
    if (out.size() > static_cast<size_t>(kMaxRank) || !es || es > 8)
      return Status();
    Strides st = makeStrides(
        out, {a.inputs[0].shape, a.inputs[1].shape, a.inputs[2].shape});
    k = lambda([=](DeviceContext &ctx, const std::vector<TensorRef> &in,
                   const std::vector<TensorRef> &o) {
      return cudaStatus(launchWhere(in[0].as<bool>(), in[1].data, in[2].data,
                                    o[0].data, o[0].type.numElements(), st, es,
                                    ctx.stream),
                        "where");
    });
    return Status();
  };
  t["cast"] = [](const KernelArgs &a, DeviceContext &,
                 std::unique_ptr<GpuKernel> &k) -> Status {
    DType from = a.inputs[0].dtype, to = a.outputs[0].dtype;
    if (!castSupported(from, to))
      return Status();
    k = lambda([=](DeviceContext &ctx, const std::vector<TensorRef> &in,
                   const std::vector<TensorRef> &o) {
      return cudaStatus(launchCast(from, to, in[0].data, o[0].data,
                                   o[0].type.numElements(), ctx.stream),
                        "cast");
    });
    return Status();
  };
}

} // namespace partc::runtime::cuda

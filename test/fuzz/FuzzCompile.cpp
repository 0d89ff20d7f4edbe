//===- FuzzCompile.cpp - libFuzzer target: an ONNX model through partc ----===//
//
// Input: a serialized ONNX ModelProto. It is imported and compiled for one
// or two devices (the placement search, splitting and lowering all run) or
// as a training step on one, exported to a plan that must pass the
// runtime's verifier (a plan the compiler wrote and the runtime refuses is
// a compiler bug, reported as a crash), and run on the CPU reference when
// small.
//
// The custom mutator edits the model's structure (attributes, shapes,
// initializers, wiring, op types, opset) rather than its bytes, so that
// most mutants still parse and reach the importer's and the passes' checks;
// one mutation in eight is libFuzzer's own byte-level one.
//
//===----------------------------------------------------------------------===//
#include "compiler/Pipeline/CompilePipeline.h"
#include "compiler/Target/PlanExport.h"
#include "dialects/Graph/GraphDialect.h"
#include "dialects/Plan/PlanDialect.h"
#include "frontends/onnx/OnnxImporter.h"
#include "test/fuzz/FuzzRun.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>

using namespace mlir;

extern "C" size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t maxSize);

namespace {

using Rng = std::mt19937_64;

template <typename T, size_t N> const T &pick(Rng &rng, const T (&items)[N]) {
  return items[rng() % N];
}
size_t below(Rng &rng, size_t n) { return n ? rng() % n : 0; }

int64_t interestingInt(Rng &rng) {
  static const int64_t values[] = {0,
                                   1,
                                   -1,
                                   2,
                                   3,
                                   -2,
                                   7,
                                   64,
                                   4096,
                                   std::numeric_limits<int32_t>::max(),
                                   std::numeric_limits<int32_t>::min(),
                                   int64_t(1) << 32,
                                   int64_t(1) << 40,
                                   int64_t(1) << 62,
                                   std::numeric_limits<int64_t>::max(),
                                   std::numeric_limits<int64_t>::min()};
  return rng() % 3 ? static_cast<int64_t>(rng() % 8) - 2 : pick(rng, values);
}

float interestingFloat(Rng &rng) {
  static const float values[] = {0.f,
                                 -0.f,
                                 1.f,
                                 -1.f,
                                 0.5f,
                                 2.f,
                                 1e-30f,
                                 1e30f,
                                 -1e30f,
                                 std::numeric_limits<float>::quiet_NaN(),
                                 std::numeric_limits<float>::infinity(),
                                 -std::numeric_limits<float>::infinity()};
  return pick(rng, values);
}

const char *const kStrings[] = {"",
                                "NOTSET",
                                "SAME_UPPER",
                                "SAME_LOWER",
                                "VALID",
                                "constant",
                                "reflect",
                                "edge",
                                "wrap",
                                "nearest",
                                "linear",
                                "cubic",
                                "half_pixel",
                                "asymmetric",
                                "floor",
                                "ceil",
                                "none",
                                "add",
                                "mul",
                                "max",
                                "min",
                                "tanh",
                                "relu",
                                "DCR",
                                "CRD",
                                "align_corners",
                                "pytorch_half_pixel",
                                "round_prefer_floor"};

const char *const kAttributeNames[] = {"axis",
                                       "axes",
                                       "perm",
                                       "pads",
                                       "strides",
                                       "kernel_shape",
                                       "dilations",
                                       "group",
                                       "keepdims",
                                       "to",
                                       "mode",
                                       "alpha",
                                       "beta",
                                       "epsilon",
                                       "auto_pad",
                                       "transA",
                                       "transB",
                                       "split",
                                       "starts",
                                       "ends",
                                       "ceil_mode",
                                       "count_include_pad",
                                       "storage_order",
                                       "blocksize",
                                       "allowzero",
                                       "batch_dims",
                                       "reduction",
                                       "value",
                                       "coordinate_transformation_mode",
                                       "noop_with_empty_axes",
                                       "approximate",
                                       "select_last_index"};

const std::vector<std::string> &opTypes() {
  static const std::vector<std::string> types = [] {
    std::vector<std::string> t = mlir::partc::onnx_import::supportedOnnxOps();
    t.push_back("Loop"); // unsupported ones too
    t.push_back("NoSuchOp");
    return t;
  }();
  return types;
}

/// Every value name a node could read: graph inputs, initializers and node
/// outputs (later ones too: a mutant may read ahead or form a cycle).
std::vector<std::string> valueNames(const onnx::GraphProto &g) {
  std::vector<std::string> names;
  for (const auto &v : g.input())
    names.push_back(v.name());
  for (const auto &t : g.initializer())
    names.push_back(t.name());
  for (const auto &n : g.node())
    for (const auto &o : n.output())
      names.push_back(o);
  return names;
}

std::string someValue(Rng &rng, const onnx::GraphProto &g) {
  std::vector<std::string> names = valueNames(g);
  if (names.empty() || rng() % 16 == 0)
    return rng() % 2 ? "" : "undefined_value";
  return names[below(rng, names.size())];
}

void mutateTensor(Rng &rng, onnx::TensorProto &t) {
  switch (rng() % 6) {
  case 0: // a dimension
    if (t.dims_size() && rng() % 4)
      t.set_dims(below(rng, t.dims_size()), interestingInt(rng));
    else
      t.add_dims(interestingInt(rng));
    break;
  case 1:
    t.set_data_type(static_cast<int32_t>(rng() % 26));
    break;
  case 2: { // raw bytes: flip, truncate or extend
    std::string *raw = t.mutable_raw_data();
    if (!raw->empty() && rng() % 2)
      (*raw)[below(rng, raw->size())] ^= static_cast<char>(1 + rng() % 255);
    else if (!raw->empty() && rng() % 2)
      raw->resize(below(rng, raw->size()));
    else
      raw->append(1 + rng() % 8, '\0');
    break;
  }
  case 3: { // an integer value, where shapes and indices live
    int64_t v = interestingInt(rng);
    if (t.int64_data_size())
      t.set_int64_data(below(rng, t.int64_data_size()), v);
    else if (t.data_type() == onnx::TensorProto::INT64 &&
             t.raw_data().size() >= 8)
      std::memcpy(t.mutable_raw_data()->data() +
                      8 * below(rng, t.raw_data().size() / 8),
                  &v, 8);
    else
      t.add_int64_data(v);
    break;
  }
  case 4: { // a float value
    float v = interestingFloat(rng);
    if (t.float_data_size())
      t.set_float_data(below(rng, t.float_data_size()), v);
    else if (t.data_type() == onnx::TensorProto::FLOAT &&
             t.raw_data().size() >= 4)
      std::memcpy(t.mutable_raw_data()->data() +
                      4 * below(rng, t.raw_data().size() / 4),
                  &v, 4);
    break;
  }
  default: // external data, whose paths and offsets are checked
    t.set_data_location(onnx::TensorProto::EXTERNAL);
    auto *entry = t.add_external_data();
    static const char *const keys[] = {"location", "offset", "length"};
    static const char *const values[] = {
        "w.bin", "../w.bin", "/etc/passwd", "0",
        "-1",    "abc",      "1e30",        "18446744073709551615"};
    entry->set_key(pick(rng, keys));
    entry->set_value(pick(rng, values));
    break;
  }
}

void mutateAttribute(Rng &rng, onnx::AttributeProto &a) {
  switch (a.type()) {
  case onnx::AttributeProto::INT:
    a.set_i(interestingInt(rng));
    break;
  case onnx::AttributeProto::FLOAT:
    a.set_f(interestingFloat(rng));
    break;
  case onnx::AttributeProto::STRING:
    a.set_s(pick(rng, kStrings));
    break;
  case onnx::AttributeProto::INTS:
    if (a.ints_size() && rng() % 3)
      a.set_ints(below(rng, a.ints_size()), interestingInt(rng));
    else if (a.ints_size() && rng() % 2)
      a.mutable_ints()->RemoveLast();
    else
      a.add_ints(interestingInt(rng));
    break;
  case onnx::AttributeProto::FLOATS:
    if (a.floats_size())
      a.set_floats(below(rng, a.floats_size()), interestingFloat(rng));
    else
      a.add_floats(interestingFloat(rng));
    break;
  case onnx::AttributeProto::TENSOR:
    mutateTensor(rng, *a.mutable_t());
    break;
  default:
    a.set_type(onnx::AttributeProto::INT);
    a.set_i(interestingInt(rng));
  }
}

void addAttribute(Rng &rng, onnx::NodeProto &n) {
  onnx::AttributeProto *a = n.add_attribute();
  a->set_name(pick(rng, kAttributeNames));
  switch (rng() % 4) {
  case 0:
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(interestingInt(rng));
    break;
  case 1:
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(interestingFloat(rng));
    break;
  case 2:
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(pick(rng, kStrings));
    break;
  default:
    a->set_type(onnx::AttributeProto::INTS);
    for (size_t i = 0, e = rng() % 5; i < e; ++i)
      a->add_ints(interestingInt(rng));
  }
}

void mutateValueInfo(Rng &rng, onnx::ValueInfoProto &v) {
  auto *tensor = v.mutable_type()->mutable_tensor_type();
  auto *shape = tensor->mutable_shape();
  switch (rng() % 4) {
  case 0:
    tensor->set_elem_type(static_cast<int32_t>(rng() % 26));
    break;
  case 1:
    if (shape->dim_size())
      shape->mutable_dim(below(rng, shape->dim_size()))
          ->set_dim_value(interestingInt(rng));
    break;
  case 2:
    if (shape->dim_size())
      shape->mutable_dim(below(rng, shape->dim_size()))->set_dim_param("n");
    break;
  default:
    if (shape->dim_size() && rng() % 2)
      shape->mutable_dim()->RemoveLast();
    else
      shape->add_dim()->set_dim_value(1 + rng() % 4);
  }
}

/// One structural edit; false where it did not apply (no nodes, say).
bool mutateOnce(Rng &rng, onnx::ModelProto &model) {
  onnx::GraphProto &g = *model.mutable_graph();
  onnx::NodeProto *node =
      g.node_size() ? g.mutable_node(below(rng, g.node_size())) : nullptr;
  switch (rng() % 14) {
  case 0:
    if (!node || !node->attribute_size())
      return false;
    mutateAttribute(
        rng, *node->mutable_attribute(below(rng, node->attribute_size())));
    return true;
  case 1:
    if (!node)
      return false;
    addAttribute(rng, *node);
    return true;
  case 2:
    if (!node || !node->attribute_size())
      return false;
    node->mutable_attribute()->DeleteSubrange(
        below(rng, node->attribute_size()), 1);
    return true;
  case 3:
    if (!node || !node->input_size())
      return false;
    node->set_input(below(rng, node->input_size()), someValue(rng, g));
    return true;
  case 4:
    if (!node)
      return false;
    if (node->input_size() && rng() % 2)
      node->mutable_input()->RemoveLast();
    else
      node->add_input(someValue(rng, g));
    return true;
  case 5:
    if (!node)
      return false;
    node->set_op_type(opTypes()[below(rng, opTypes().size())]);
    return true;
  case 6: { // a copy of a node, its outputs renamed
    if (!node)
      return false;
    onnx::NodeProto copy = *node;
    for (int i = 0; i < copy.output_size(); ++i)
      copy.set_output(i, copy.output(i) + "_copy" + std::to_string(rng() % 8));
    *g.add_node() = copy;
    return true;
  }
  case 7:
    if (!node)
      return false;
    g.mutable_node()->DeleteSubrange(below(rng, g.node_size()), 1);
    return true;
  case 8:
    if (g.node_size() < 2)
      return false;
    g.mutable_node()->SwapElements(below(rng, g.node_size()),
                                   below(rng, g.node_size()));
    return true;
  case 9: {
    if (!g.input_size() && !g.output_size())
      return false;
    bool input = g.input_size() && (rng() % 2 || !g.output_size());
    mutateValueInfo(rng, input
                             ? *g.mutable_input(below(rng, g.input_size()))
                             : *g.mutable_output(below(rng, g.output_size())));
    return true;
  }
  case 10:
    if (!g.initializer_size())
      return false;
    mutateTensor(rng, *g.mutable_initializer(below(rng, g.initializer_size())));
    return true;
  case 11: {
    static const int64_t opsets[] = {1, 6, 7, 9, 11, 13, 17, 18, 21, 22, 23};
    if (!model.opset_import_size())
      model.add_opset_import()->set_version(13);
    model.mutable_opset_import(0)->set_version(pick(rng, opsets));
    return true;
  }
  case 12:
    if (!g.output_size())
      return false;
    g.mutable_output(below(rng, g.output_size()))->set_name(someValue(rng, g));
    return true;
  default: { // a new node reading existing values, maybe a graph output
    onnx::NodeProto *added = g.add_node();
    added->set_op_type(opTypes()[below(rng, opTypes().size())]);
    added->set_name("fuzz" + std::to_string(g.node_size()));
    for (size_t i = 0, e = 1 + rng() % 3; i < e; ++i)
      added->add_input(someValue(rng, g));
    std::string out = "fuzz_out" + std::to_string(g.node_size());
    added->add_output(out);
    if (rng() % 2 && g.output_size())
      g.mutable_output(below(rng, g.output_size()))->set_name(out);
    return true;
  }
  }
}

DialectRegistry &registry() {
  static DialectRegistry r = [] {
    DialectRegistry registry;
    registry.insert<mlir::partc::graph::GraphDialect,
                    mlir::partc::plan::PlanDialect, func::FuncDialect,
                    memref::MemRefDialect>();
    return registry;
  }();
  return r;
}

} // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size,
                                          size_t maxSize, unsigned int seed) {
  Rng rng(seed);
  onnx::ModelProto model;
  if (rng() % 8 == 0 || size > std::numeric_limits<int>::max() ||
      !model.ParseFromArray(data, static_cast<int>(size)) || !model.has_graph())
    return LLVMFuzzerMutate(data, size, maxSize);
  for (int applied = 0, tries = 0; applied < 1 + int(rng() % 3) && tries < 8;
       ++tries)
    applied += mutateOnce(rng, model);
  std::string out;
  if (!model.SerializeToString(&out) || out.size() > maxSize)
    return LLVMFuzzerMutate(data, size, maxSize);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}

// The sanitizers' memory limit is below this machine's: run as if on a
// machine of 512 MiB, so that sizes a real machine would accept but the
// fuzzer cannot hold are refused as too large rather than reported as
// out-of-memory.
extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  ::partc::runtime::limitHostMemory(uint64_t(512) << 20);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // A context per input: one shared context would keep every input's
  // uniqued types and attributes and grow without bound.
  MLIRContext context(registry(), MLIRContext::Threading::DISABLED);
  context.loadAllAvailableDialects();
  context.printOpOnDiagnostic(false);
  // Diagnostics are the expected outcome for most inputs; silence them.
  ScopedDiagnosticHandler quiet(&context,
                                [](Diagnostic &) { return success(); });
  mlir::partc::onnx_import::ImportOptions importOptions;
  importOptions.batch = 2;
  OwningOpRef<ModuleOp> module = mlir::partc::onnx_import::importOnnxBuffer(
      &context, llvm::StringRef(reinterpret_cast<const char *>(data), size),
      "/nonexistent-partc-fuzz/model.onnx", importOptions);
  if (!module)
    return 0;

  mlir::partc::CompilePipelineOptions options;
  // One or two devices, decided by the input so that a crash reproduces.
  options.devices = size % 2 ? "2" : "1";
  // One input in four compiles a training step on one device instead (MSE
  // on its output, SGD with momentum; half of them with every activation
  // computed again), so that differentiation, the gradient rules and the
  // optimizer's passes see the mutants too.
  if (size % 4 == 3) {
    options.devices = "1";
    options.train = true;
    options.momentum = 0.9;
    if (size % 8 == 7)
      options.recompute = "all";
  }
  PassManager pm(&context);
  mlir::partc::buildCompilePipeline(pm, options);
  if (failed(pm.run(*module)))
    return 0;
  ::partc::runtime::Plan plan;
  std::vector<uint8_t> weights;
  if (failed(mlir::partc::exportPlan(*module, plan, weights)))
    return 0;
  ::partc::runtime::Status verified = ::partc::runtime::verifyPlan(plan);
  if (!verified.ok()) {
    std::fprintf(stderr, "compiled plan fails verification: %s\n",
                 verified.message().c_str());
    std::abort();
  }
  ::partc::fuzz::runSmallPlan(plan);
  return 0;
}

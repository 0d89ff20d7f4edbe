//===- partc.cpp - The partc compiler driver ------------------------------===//
//
//   partc compile MODEL.onnx -o MODEL.plan [--devices N]
//         [--strategy single|pipeline|data] [--micro-batches M] [--batch B]
//         [--split-at NODE[,NODE...]] [--emit=plan|mlir|graph|import]
//         [--print-ir-after-all] [--quiet]
//
// The driver parses options, imports the model, runs the compile pipeline
// (compiler/Pipeline) and writes its result; partc-opt runs the same
// pipeline as --partc-compile.
//
//===----------------------------------------------------------------------===//
#include "compiler/Pipeline/CompilePipeline.h"
#include "compiler/Target/PlanExport.h"
#include "compiler/Utils/PassUtils.h"
#include "dialects/Graph/GraphOps.h"
#include "dialects/Plan/PlanDialect.h"
#include "frontends/onnx/OnnxImporter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <set>

using namespace mlir;
namespace cl = llvm::cl;
using mlir::partc::formatBytes;

static cl::opt<std::string> inputPath(cl::Positional, cl::desc("<model.onnx>"),
                                      cl::Required);
static cl::opt<std::string> outputPath("o", cl::desc("Output file"),
                                       cl::value_desc("file"), cl::Required);
static cl::opt<std::string> devicesOpt(
    "devices",
    cl::desc("Devices: a count (H200s) or COUNTxPRESET, e.g. 4xh200, "
             "2xh100, 8xa100"),
    cl::init("1"));
static cl::opt<std::string>
    topologyPath("topology", cl::desc("JSON description of the machine"),
                 cl::value_desc("file"), cl::init(""));
static cl::opt<std::string>
    strategy("strategy",
             cl::desc("auto (default: searched by the cost model) | single | "
                      "pipeline | data"),
             cl::init("auto"));
static cl::opt<std::string>
    transfers("transfers",
              cl::desc("How transfers move between GPUs: p2p (default: "
                       "device-to-device copies over NVLink or PCIe) or nccl "
                       "(NCCL send/receive)"),
              cl::init("p2p"));
static cl::opt<std::string>
    objective("objective", cl::desc("throughput (default) or latency"),
              cl::init("throughput"));
static cl::opt<int64_t>
    stagesOpt("stages",
              cl::desc("Pipeline stages per replica (with --strategy auto; "
                       "default: searched)"),
              cl::init(0));
static cl::opt<int64_t>
    replicasOpt("replicas",
                cl::desc("Data-parallel replicas (with --strategy auto; "
                         "default: searched); --stages S --replicas R makes "
                         "a hybrid of S x R devices"),
                cl::init(0));
static cl::opt<int64_t>
    microBatches("micro-batches",
                 cl::desc("Micro-batches for pipelining (default: searched)"),
                 cl::init(0));
static cl::opt<std::string>
    schedule("schedule",
             cl::desc("Training pipeline schedule: gpipe or 1f1b (default: "
                      "1f1b, the same bubble with fewer activations kept)"),
             cl::init("auto"));
static cl::opt<std::string>
    explain("explain", cl::desc("Print why the plan was chosen: text or json"),
            cl::ValueOptional, cl::init(""));
static cl::opt<std::string>
    costTablePath("cost-table",
                  cl::desc("Measured kernel times (partc-run --profile); "
                           "several files separated by commas"),
                  cl::value_desc("file"), cl::init(""));
static cl::opt<int64_t>
    batch("batch", cl::desc("Value of a dynamic leading input dimension"),
          cl::init(1));
static cl::list<std::string>
    splitAt("split-at", cl::desc("ONNX nodes after which a new stage starts"),
            cl::CommaSeparated);
static cl::opt<std::string>
    emit("emit",
         cl::desc("plan (the plan file), mlir (plan dialect), graph (placed "
                  "graph dialect) or import (the graph as imported, for "
                  "partc-opt --partc-compile)"),
         cl::init("plan"));
static cl::opt<bool> printIRAfterAll("print-ir-after-all",
                                     cl::desc("Print the IR after each pass"),
                                     cl::init(false));
static cl::opt<bool>
    passTiming("timing", cl::desc("Print the time each pass took (to stderr)"),
               cl::init(false));
static cl::list<std::string>
    dimBindings("dim",
                cl::desc("Value of a symbolic input dimension by its ONNX "
                         "name, e.g. --dim seq=128 (repeatable)"),
                cl::value_desc("NAME=VALUE"));
static cl::list<std::string>
    shapeBindings("shape",
                  cl::desc("Whole shape of a graph input, e.g. --shape "
                           "input_ids=8x128 (repeatable)"),
                  cl::value_desc("INPUT=D0xD1x..."));
static cl::list<std::string>
    constInputs("const-input",
                cl::desc("Freeze graph input NAME to the tensor in FILE "
                         "(.pb or .npy), e.g. a shape operand"),
                cl::value_desc("NAME=FILE"));
static cl::opt<std::string>
    layout("layout",
           cl::desc("Convolution layout: nhwc (default; channels last, what "
                    "GPU tensor cores read) or nchw (as in the model)"),
           cl::init("nhwc"));
static cl::opt<bool> quiet("quiet", cl::desc("Do not print the plan summary"),
                           cl::init(false));
static cl::opt<bool> noFuseAttention(
    "no-fuse-attention",
    cl::desc("Run attention's products and softmax as three kernels "
             "instead of one (for comparison)"),
    cl::init(false));
static cl::opt<bool> noMergeProjections(
    "no-merge-projections",
    cl::desc("Run attention's query, key and value projections as separate "
             "products instead of one (for comparison)"),
    cl::init(false));
static cl::opt<int64_t> branchStreams(
    "branch-streams",
    cl::desc("Streams a device may run independent branches on, side by "
             "side where the cost model predicts a gain (inference; 1 to 4, "
             "1: one stream)"),
    cl::init(4));
static cl::opt<bool> exactGelu(
    "exact-gelu",
    cl::desc("In 16-bit plans, keep the exact (erf) Gelu as an op of its own "
             "instead of the product's tanh-form epilogue (at most 4.7e-4 "
             "apart)"),
    cl::init(false));
static cl::opt<bool> noFuseConcat(
    "no-fuse-concat",
    cl::desc("Write each concatenation out before the element-wise chain "
             "that reads it instead of reading its parts in place (for "
             "comparison)"),
    cl::init(false));
static cl::opt<bool> noFuseElementwise(
    "no-fuse-elementwise",
    cl::desc("Run each element-wise op as its own kernel instead of fusing "
             "chains of them (for comparison)"),
    cl::init(false));
static cl::opt<bool> noFoldMatMulViews(
    "no-fold-matmul-views",
    cl::desc("Copy slices and transposes around batched MatMuls instead of "
             "reading them in place (for comparison)"),
    cl::init(false));
static cl::opt<bool> noPadMatMulColumns(
    "no-pad-matmul-columns",
    cl::desc("Multiply by wide matrices of an unaligned column count as "
             "they are instead of padding their columns (for comparison)"),
    cl::init(false));

static cl::opt<std::string> precisionOpt(
    "precision",
    cl::desc("fp32 (default), or bf16 or fp16: activations and weights in "
             "that type, accumulation and statistics in f32 (inference)"),
    cl::init("fp32"));

static cl::OptionCategory trainingCategory("Training (--train)");
static cl::opt<bool> train("train",
                           cl::desc("Compile one training step: the loss, "
                                    "the gradients and the optimizer's "
                                    "update, replayed by partc-run --steps"),
                           cl::init(false), cl::cat(trainingCategory));
static cl::opt<std::string>
    lossKind("loss",
             cl::desc("mse, cross-entropy, bce-with-logits or l1 (means over "
                      "the batch, as PyTorch's defaults)"),
             cl::init("mse"), cl::cat(trainingCategory));
static cl::opt<std::string>
    lossOutput("output",
               cl::desc("The output the loss applies to (default: "
                        "the model's only output)"),
               cl::init(""), cl::cat(trainingCategory));
static cl::list<std::string>
    frozenNames("frozen", cl::desc("Initializers that are not trained"),
                cl::CommaSeparated, cl::cat(trainingCategory));
static cl::opt<std::string>
    optimizerKind("optimizer",
                  cl::desc("sgd, adamw, or none (the plan returns the loss "
                           "and every gradient)"),
                  cl::init("sgd"), cl::cat(trainingCategory));
static cl::opt<double> learningRate("lr", cl::desc("Learning rate"),
                                    cl::init(0.001), cl::cat(trainingCategory));
static cl::opt<double> momentumOpt("momentum", cl::desc("SGD's momentum"),
                                   cl::init(0.0), cl::cat(trainingCategory));
static cl::opt<double>
    weightDecayOpt("weight-decay",
                   cl::desc("Weight decay (default: SGD 0, AdamW 0.01)"),
                   cl::init(-1.0), cl::cat(trainingCategory));
static cl::opt<std::string> betasOpt("betas",
                                     cl::desc("AdamW's B1,B2 (0.9,0.999)"),
                                     cl::init("0.9,0.999"),
                                     cl::cat(trainingCategory));
static cl::opt<double> batchNormMomentumOpt(
    "batch-norm-momentum",
    cl::desc("Weight of the batch's statistics in batch norm's running "
             "ones, PyTorch's momentum, for every norm (default: each "
             "norm's own, 1 - its ONNX momentum; 0.1 where it has none)"),
    cl::init(-1), cl::cat(trainingCategory));
static cl::opt<double> epsOpt("eps", cl::desc("AdamW's epsilon"),
                              cl::init(1e-8), cl::cat(trainingCategory));
static cl::opt<std::string> recomputeOpt(
    "recompute",
    cl::desc("Activations computed again in the backward pass instead of "
             "kept: auto (only when a step does not fit the device), none, "
             "or all that can be"),
    cl::init("auto"), cl::cat(trainingCategory));
static cl::opt<int64_t> bucketBytesOpt(
    "bucket-bytes",
    cl::desc("The most gradient bytes one all-reduce of data-parallel "
             "training averages (0: chosen from the link; 1: one "
             "all-reduce per gradient)"),
    cl::init(0), cl::cat(trainingCategory));
static cl::opt<int64_t>
    seedOpt("seed",
            cl::desc("Dropout's seed, kept as the plan's state rng.seed "
                     "(partc-run --seed sets another)"),
            cl::init(0), cl::cat(trainingCategory));

namespace {

std::string fileOf(Location loc) {
  if (auto f = dyn_cast<FileLineColLoc>(loc))
    return f.getFilename().str();
  if (auto n = dyn_cast<NameLoc>(loc))
    return fileOf(n.getChildLoc());
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location l : fused.getLocations())
      if (std::string f = fileOf(l); !f.empty())
        return f;
  return "";
}

/// Writes "partc: error: FILE: node 'NAME': message" so every diagnostic
/// names the model file and, where it has one, the ONNX node.
void formatDiagnostic(Diagnostic &diag, llvm::raw_ostream &os) {
  // Passes report their choices as remarks for partc-opt's tests; the
  // driver says what it chose through the summary and --explain.
  if (diag.getSeverity() == DiagnosticSeverity::Remark)
    return;
  const char *severity = "error";
  switch (diag.getSeverity()) {
  case DiagnosticSeverity::Warning:
    severity = "warning";
    break;
  case DiagnosticSeverity::Note:
    severity = "note";
    break;
  case DiagnosticSeverity::Remark:
    severity = "remark";
    break;
  default:
    break;
  }
  os << "partc: " << severity << ": ";
  std::string file = fileOf(diag.getLocation());
  if (!file.empty())
    os << file << ": ";
  std::string node = mlir::partc::onnxNodeName(diag.getLocation());
  if (!node.empty())
    os << "node '" << node << "': ";
  os << diag.str() << "\n";
  for (Diagnostic &note : diag.getNotes())
    formatDiagnostic(note, os);
}

LogicalResult printDiagnostic(Diagnostic &diag) {
  formatDiagnostic(diag, llvm::errs());
  return success();
}

int fail(const llvm::Twine &msg) {
  llvm::errs() << "partc: error: " << msg << "\n";
  return 1;
}

std::string metadataOf(const ::partc::runtime::Plan &plan, const char *key) {
  auto it = plan.metadata.find(key);
  return it == plan.metadata.end() ? "" : it->second;
}

/// A per-device figure of the plan's metadata ("a,b,..."), e.g.
/// partc-report-step-memory's.
std::vector<int64_t> perDeviceMetadata(const ::partc::runtime::Plan &plan,
                                       const char *key) {
  std::vector<int64_t> values;
  std::string text = metadataOf(plan, key);
  llvm::SmallVector<llvm::StringRef> items;
  llvm::StringRef(text).split(items, ',', -1, false);
  for (llvm::StringRef item : items)
    values.push_back(std::atoll(item.str().c_str()));
  return values;
}

/// What --explain says of a training plan's placement.
struct TrainingFacts {
  int64_t batch = 0, microBatches = 1, allReduces = 0, allReduceBytes = 0;
  int64_t allReduceBuckets = 0;
  int64_t stages = 1, replicas = 1, transfers = 0, transferBytes = 0;
  std::string schedule;
  bool batchNorm = false;
};

TrainingFacts trainingFacts(const ::partc::runtime::Plan &plan) {
  TrainingFacts f;
  // The labels' leading dimension is the batch.
  for (const auto &input : plan.inputs)
    if (input.name == "labels" && !input.type.shape.empty())
      f.batch = input.type.shape[0];
  auto count = [&](const char *key) {
    return std::max<int64_t>(1, std::atoll(metadataOf(plan, key).c_str()));
  };
  f.microBatches = count("micro_batches");
  f.stages = count("stages");
  f.replicas = count("replicas");
  f.schedule = metadataOf(plan, "schedule");
  // Each stage's replicas average its gradients: one group per bucket of
  // gradients.
  std::set<uint32_t> groups;
  for (const auto &device : plan.devices)
    for (const auto &in : device.instructions)
      if (in.op == ::partc::runtime::OpCode::AllReduce) {
        if (!groups.insert(in.index).second)
          continue;
        ++f.allReduceBuckets;
        f.allReduces += static_cast<int64_t>(in.inputs.size());
        for (const auto &source : in.inputs)
          f.allReduceBytes += static_cast<int64_t>(source.type.byteSize());
      } else if (in.op == ::partc::runtime::OpCode::Send) {
        ++f.transfers;
        f.transferBytes += static_cast<int64_t>(in.inputs[0].type.byteSize());
      }
  f.batchNorm = std::any_of(
      plan.states.begin(), plan.states.end(),
      [](const auto &state) { return state.role == "running_mean"; });
  return f;
}

/// --explain of a training plan: what one step keeps in each device's
/// memory (partc-report-step-memory's figures).
void printStepMemory(const ::partc::runtime::Plan &plan) {
  auto column = [&](const char *key) { return perDeviceMetadata(plan, key); };
  const std::pair<const char *, const char *> rows[] = {
      {"memory_parameters", "parameters"},
      {"memory_optimizer_state", "optimizer state (moments, step)"},
      {"memory_other_state", "other state (running statistics, seed)"},
      {"memory_constants", "constants"},
      {"memory_arena", "arena (planned by lifetime)"},
      {"memory_inputs", "  of which inputs and labels"},
      {"memory_kept_activations", "  of which kept for the backward pass"},
      {"memory_gradients", "  of which gradients at the update"}};
  size_t devices = column("memory_arena").size();
  if (devices == 0)
    return;
  llvm::outs() << "memory of a training step (library workspaces, chosen "
                  "when the plan loads, not included: partc-run --summary "
                  "prints them):\n";
  for (size_t d = 0; d < devices; ++d) {
    llvm::outs() << "  device " << d << "\n";
    double total = 0;
    for (auto [key, label] : rows) {
      std::vector<int64_t> values = column(key);
      double v = d < values.size() ? double(values[d]) : 0;
      // The arena's parts overlap in time; the arena is their peak.
      if (label[0] != ' ')
        total += v;
      llvm::outs() << llvm::format("    %-46s %12s\n", label,
                                   formatBytes(v).c_str());
    }
    llvm::outs() << llvm::format("    %-46s %12s\n", "total",
                                 formatBytes(total).c_str());
  }
  std::string recomputed = metadataOf(plan, "recomputed");
  llvm::outs() << "  recomputed: "
               << (recomputed.empty() ? "nothing (every activation the "
                                        "backward pass reads is kept)"
                                      : recomputed)
               << "\n";
}

/// partc-recompute-activations' choice, for the plan's metadata and
/// --explain; "" when it did not run.
std::string describeRecomputed(ModuleOp module) {
  auto facts = module->getAttrOfType<DictionaryAttr>("partc.recomputed");
  if (!facts)
    return "";
  auto values = facts.getAs<IntegerAttr>("values");
  auto bytes = facts.getAs<IntegerAttr>("bytes");
  auto seconds = facts.getAs<FloatAttr>("seconds");
  if (!values || !bytes || !seconds)
    return "";
  return llvm::formatv("{0} activation(s) computed again in the backward "
                       "pass, {1} fewer kept, about {2:f2} ms more per step "
                       "(predicted)",
                       values.getInt(),
                       formatBytes(static_cast<double>(bytes.getInt())),
                       seconds.getValueAsDouble() * 1e3)
      .str();
}

/// Who chose a training layout: the cost model (--strategy auto, see
/// the ranking printed after) or the options named in `byOptions`.
void printChoice(const ::partc::runtime::Plan &plan, StringRef byOptions) {
  std::string choice = metadataOf(plan, "training_choice");
  if (!choice.empty())
    llvm::outs() << "  chosen by --strategy auto: " << choice << "\n";
  else
    llvm::outs() << "  chosen by the options (" << byOptions << ")\n";
}

/// --explain of a training plan: how the step is spread over devices.
void printTrainingPlacement(const ::partc::runtime::Plan &plan) {
  size_t devices = plan.devices.size();
  TrainingFacts f = trainingFacts(plan);
  int64_t batch = f.batch, micro = f.microBatches;
  int64_t perReplica = batch / f.replicas;
  std::string accumulation =
      micro > 1
          ? "  gradients accumulated over " + std::to_string(micro) +
                " micro-batches of " + std::to_string(perReplica / micro) +
                " samples" + (f.stages > 1 ? "" : ", one after another,") +
                " before one update\n"
          : "";
  std::string batchNorm =
      !f.batchNorm ? ""
      : micro > 1
          ? "  batch normalization normalizes each micro-batch with its own "
            "statistics and moves the running ones once per micro-batch, as "
            "PyTorch's accumulation loop does\n"
      : f.replicas > 1
          ? "  batch normalization normalizes with each replica's own "
            "statistics, as DistributedDataParallel does without "
            "SyncBatchNorm; --save-state and --save-onnx keep replica 0's "
            "running statistics\n"
          : "";
  std::string bucketLimit;
  if (std::string limit = metadataOf(plan, "all_reduce_bucket_bytes");
      !limit.empty())
    bucketLimit = " (buckets of at most " +
                  formatBytes(double(std::atoll(limit.c_str()))) + ")";
  std::string allReduces =
      f.replicas > 1
          ? "  gradients averaged across replicas: " +
                std::to_string(f.allReduces) + " tensors, " +
                formatBytes(double(f.allReduceBytes)) +
                " per step (the loss included), in " +
                std::to_string(f.allReduceBuckets) +
                (f.allReduceBuckets == 1 ? " all-reduce" : " all-reduces") +
                bucketLimit +
                ", each started as soon as its last gradient is computed\n"
          : "";
  if (devices < 2) {
    llvm::outs() << "training placement: one device\n"
                 << accumulation << batchNorm;
    return;
  }
  if (f.stages > 1) {
    int64_t s = f.stages;
    llvm::outs() << "training placement: pipeline of " << s << " stages"
                 << (f.replicas > 1 ? " x " + std::to_string(f.replicas) +
                                          " data-parallel replicas (stage s of "
                                          "replica r on device r*" +
                                          std::to_string(s) + "+s)"
                                    : std::string(" (stage s on device s)"))
                 << ", " << micro
                 << (micro == 1 ? " micro-batch of " : " micro-batches of ")
                 << perReplica / micro << " samples per replica, schedule "
                 << f.schedule << "\n"
                 << accumulation
                 << "  activations forward, gradients back: " << f.transfers
                 << " transfers of " << formatBytes(double(f.transferBytes))
                 << " per step\n"
                 << "  idle share of each stage (the bubble, equal stage "
                    "times): "
                 << llvm::format("%.0f%%",
                                 100.0 * double(s - 1) / double(micro + s - 1))
                 << (f.schedule == "1f1b"
                         ? "; 1F1B keeps at most S - s micro-batches' "
                           "activations on stage s, GPipe all of them"
                         : "; GPipe keeps all micro-batches' activations, "
                           "1F1B at most S - s on stage s")
                 << "\n"
                 << allReduces << batchNorm;
    printChoice(plan, "--strategy pipeline, --stages, --split-at");
    return;
  }
  llvm::outs() << "training placement: data parallelism, " << devices
               << " replicas (one per device), each running the whole step "
                  "on "
               << perReplica << " of the batch's " << batch
               << " samples with its own copy of the parameters "
                  "and optimizer state\n"
               << accumulation << allReduces << batchNorm;
  printChoice(plan, "--strategy data, --replicas");
}

/// --explain=json of a training plan: the placement and each device's
/// memory of a step, one JSON document.
void printTrainingJson(const ::partc::runtime::Plan &plan) {
  TrainingFacts f = trainingFacts(plan);
  llvm::json::Array devices;
  const char *keys[][2] = {{"parameters", "memory_parameters"},
                           {"optimizer_state", "memory_optimizer_state"},
                           {"other_state", "memory_other_state"},
                           {"constants", "memory_constants"},
                           {"arena", "memory_arena"},
                           {"inputs", "memory_inputs"},
                           {"kept_activations", "memory_kept_activations"},
                           {"gradients", "memory_gradients"}};
  for (size_t d = 0; d < plan.devices.size(); ++d) {
    llvm::json::Object device{{"device", int64_t(d)}};
    for (auto &[name, key] : keys) {
      std::vector<int64_t> values = perDeviceMetadata(plan, key);
      device[name] = d < values.size() ? values[d] : 0;
    }
    devices.push_back(std::move(device));
  }
  llvm::json::Object training{
      {"strategy", metadataOf(plan, "strategy")},
      {"replicas", f.replicas},
      {"stages", f.stages},
      {"schedule", f.schedule},
      {"micro_batches", f.microBatches},
      {"batch", f.batch},
      {"all_reduces", f.allReduces},
      {"all_reduce_bytes", f.allReduceBytes},
      {"all_reduce_buckets", f.allReduceBuckets},
      {"transfers", f.transfers},
      {"transfer_bytes", f.transferBytes},
      {"loss", metadataOf(plan, "training_loss")},
      {"optimizer", metadataOf(plan, "training_optimizer")},
      {"choice", metadataOf(plan, "training_choice")},
      {"recomputed", metadataOf(plan, "recomputed")},
      {"memory_bytes", std::move(devices)}};
  llvm::outs() << llvm::formatv(
      "{0:2}\n",
      llvm::json::Value(llvm::json::Object{{"training", std::move(training)}}));
}

int compile() {
  if (batch < 1)
    return fail("--batch must be at least 1, got " + llvm::Twine(batch));
  if (emit != "plan" && emit != "mlir" && emit != "graph" && emit != "import")
    return fail("unknown --emit '" + emit +
                "'; expected plan, mlir, graph or import");
  mlir::partc::CompilePipelineOptions options;
  options.devices = devicesOpt;
  options.topology = topologyPath;
  options.strategy = strategy;
  options.objective = objective;
  options.stages = stagesOpt;
  options.replicas = replicasOpt;
  options.microBatches = microBatches;
  options.schedule = schedule;
  options.costTable = costTablePath;
  options.splitAt = SmallVector<std::string>(splitAt.begin(), splitAt.end());
  options.transfers = transfers;
  options.layout = layout;
  options.fuseElementwise = !noFuseElementwise;
  options.fuseAttention = !noFuseAttention;
  options.fuseConcat = !noFuseConcat;
  options.exactGelu = exactGelu;
  options.branchStreams = branchStreams;
  options.mergeProjections = !noMergeProjections;
  options.foldMatMulViews = !noFoldMatMulViews;
  options.padMatMulColumns = !noPadMatMulColumns;
  options.precision = precisionOpt;
  options.lower = emit != "graph";
  options.explain = explain;
  options.train = train;
  options.loss = lossKind;
  options.lossOutput = lossOutput;
  options.frozen =
      SmallVector<std::string>(frozenNames.begin(), frozenNames.end());
  options.optimizer = optimizerKind;
  options.lr = learningRate;
  options.momentum = momentumOpt;
  options.weightDecay = weightDecayOpt;
  options.eps = epsOpt;
  options.batchNormMomentum = batchNormMomentumOpt;
  options.seed = seedOpt;
  options.recompute = recomputeOpt;
  options.bucketBytes = bucketBytesOpt;
  {
    double b1 = 0, b2 = 0;
    char tail = 0;
    if (std::sscanf(betasOpt.c_str(), "%lf,%lf%c", &b1, &b2, &tail) != 2)
      return fail("--betas expects B1,B2 (two numbers), got '" + betasOpt +
                  "'");
    options.beta1 = b1;
    options.beta2 = b2;
  }
  bool trainingOption =
      lossKind.getNumOccurrences() || lossOutput.getNumOccurrences() ||
      frozenNames.getNumOccurrences() || optimizerKind.getNumOccurrences() ||
      learningRate.getNumOccurrences() || momentumOpt.getNumOccurrences() ||
      weightDecayOpt.getNumOccurrences() || betasOpt.getNumOccurrences() ||
      epsOpt.getNumOccurrences() || batchNormMomentumOpt.getNumOccurrences() ||
      seedOpt.getNumOccurrences() || recomputeOpt.getNumOccurrences() ||
      bucketBytesOpt.getNumOccurrences();
  if (trainingOption && !train)
    return fail("training options (--loss, --optimizer, --lr...) need --train");
  if (explain.getNumOccurrences() && explain.empty())
    options.explain = "text";
  if (std::string error = mlir::partc::checkCompileOptions(options);
      !error.empty())
    return fail(error);

  DialectRegistry registry;
  registry
      .insert<mlir::partc::graph::GraphDialect, mlir::partc::plan::PlanDialect,
              func::FuncDialect, memref::MemRefDialect>();
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  context.printOpOnDiagnostic(false);
  ScopedDiagnosticHandler handler(&context, printDiagnostic);

  auto start = std::chrono::steady_clock::now();
  mlir::partc::onnx_import::ImportOptions importOptions;
  importOptions.batch = batch;
  importOptions.batchGiven = batch.getNumOccurrences() > 0;
  importOptions.keepParameters = train;
  for (const std::string &entry : constInputs) {
    size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0)
      return fail("--const-input expects NAME=FILE, got '" + entry + "'");
    importOptions.constantInputs[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  // A positive size in decimal, whole.
  auto parseSize = [](StringRef text, int64_t &value) {
    return !text.getAsInteger(10, value) && value > 0;
  };
  for (const std::string &entry : dimBindings) {
    auto [name, value] = StringRef(entry).split('=');
    int64_t size = 0;
    if (name.empty() || !parseSize(value, size))
      return fail("--dim expects NAME=VALUE with a positive VALUE, got '" +
                  entry + "'");
    importOptions.dims[name.str()] = size;
  }
  for (const std::string &entry : shapeBindings) {
    auto [name, text] = StringRef(entry).split('=');
    SmallVector<StringRef> parts;
    text.split(parts, 'x');
    std::vector<int64_t> shape;
    for (StringRef part : parts) {
      int64_t size = 0;
      if (!parseSize(part, size))
        return fail("--shape expects INPUT=D0xD1x... with positive sizes, "
                    "got '" +
                    entry + "'");
      shape.push_back(size);
    }
    if (name.empty() || text.empty())
      return fail("--shape expects INPUT=D0xD1x..., got '" + entry + "'");
    importOptions.shapes[name.str()] = shape;
  }
  OwningOpRef<ModuleOp> module = mlir::partc::onnx_import::importOnnxFile(
      &context, inputPath, importOptions);
  if (!module)
    return 1;

  std::string error;
  auto writeModule = [&](bool debugInfo) {
    auto out = openOutputFile(outputPath, &error);
    if (!out)
      return fail("cannot write '" + outputPath + "': " + error);
    OpPrintingFlags flags;
    if (debugInfo)
      flags.enableDebugInfo();
    module->print(out->os(), flags);
    out->os() << "\n";
    out->keep();
    return 0;
  };
  // The imported graph, with the ONNX node names, as partc-opt's input.
  if (emit == "import")
    return writeModule(/*debugInfo=*/true);

  auto runPipeline = [&](const mlir::partc::CompilePipelineOptions &o) {
    PassManager pm(&context);
    if (printIRAfterAll) {
      context.disableMultithreading();
      pm.enableIRPrinting([](Pass *, Operation *) { return false; },
                          [](Pass *, Operation *) { return true; },
                          /*printModuleScope=*/true,
                          /*printAfterOnlyOnChange=*/false);
    }
    if (passTiming)
      pm.enableTiming();
    mlir::partc::buildCompilePipeline(pm, o);
    return pm.run(*module);
  };
  // Runs the pipeline with its diagnostics kept in `text`.
  auto runCollected = [&](const mlir::partc::CompilePipelineOptions &o,
                          std::string &text) {
    text.clear();
    llvm::raw_string_ostream os(text);
    ScopedDiagnosticHandler collect(&context, [&](Diagnostic &diag) {
      formatDiagnostic(diag, os);
      return success();
    });
    return runPipeline(o);
  };
  // A training step the memory check refuses compiles again (--recompute
  // auto) with activations computed again in the backward pass: first the
  // bytes it was over by and a quarter more, then as many more as the last
  // attempt's bytes per byte of arena saved say (the arena's peak does not
  // fall byte for byte: it may move into the backward pass), then every
  // activation that can be.
  auto runFitting = [&](mlir::partc::CompilePipelineOptions &o,
                        std::string &text) -> LogicalResult {
    o.recomputeBytes = 0;
    if (succeeded(runCollected(o, text)))
      return success();
    if (!o.train || o.recompute != "auto")
      return failure();
    // The options are the next attempt's too.
    llvm::scope_exit restore([&] {
      o.recompute = "auto";
      o.recomputeBytes = 0;
    });
    constexpr int kRetries = 3;
    double firstExcess = 0;
    for (int retry = 0; retry < kRetries; ++retry) {
      auto excess =
          (*module)->getAttrOfType<FloatAttr>("partc.memory_excess_bytes");
      if (!excess)
        return failure(); // refused for another reason than memory
      double over = excess.getValueAsDouble();
      double saved = 0;
      if (auto done =
              (*module)->getAttrOfType<DictionaryAttr>("partc.recomputed"))
        if (auto bytes = done.getAs<IntegerAttr>("bytes"))
          saved = static_cast<double>(bytes.getInt());
      if (retry == 0) {
        firstExcess = over;
        o.recomputeBytes = over * 1.25;
      } else if (retry + 1 < kRetries && saved > 0 && over < firstExcess) {
        o.recomputeBytes = saved + over * 1.25 * saved / (firstExcess - over);
      } else {
        o.recompute = "all";
      }
      module = mlir::partc::onnx_import::importOnnxFile(&context, inputPath,
                                                        importOptions);
      if (!module)
        return failure();
      if (succeeded(runCollected(o, text)))
        return success();
      if (o.recompute == "all")
        return failure();
    }
    return failure();
  };
  // Training on several devices with nothing but --devices: the cost
  // model ranks the layouts (stages x replicas, micro-batches, schedule)
  // and the best that compiles wins; the compile's exact memory check may
  // refuse one the estimate took, and the next is tried.
  std::string trainingChoice, searchExplanation;
  if (mlir::partc::trainingLayoutIsOpen(options)) {
    auto ranked = mlir::partc::searchTrainingLayouts(*module, options);
    if (failed(ranked))
      return 1;
    // Runs the pipeline for candidate `c`, its diagnostics kept in `text`.
    auto attempt = [&](const mlir::partc::TrainingCandidate &c,
                       std::string &text) {
      mlir::partc::constrainToLayout(options, c);
      return runFitting(options, text);
    };
    constexpr size_t kMostAttempts = 4;
    std::vector<std::string> refusals;
    std::string firstErrors, warnings;
    size_t chosen = ranked->candidates.size();
    for (size_t i = 0;
         i < ranked->candidates.size() && refusals.size() < kMostAttempts;
         ++i) {
      const mlir::partc::TrainingCandidate &c = ranked->candidates[i];
      if (!c.possible)
        break;
      if (i > 0) {
        module = mlir::partc::onnx_import::importOnnxFile(&context, inputPath,
                                                          importOptions);
        if (!module)
          return 1;
      }
      std::string errors;
      if (succeeded(attempt(c, errors))) {
        chosen = i;
        warnings = errors;
        break;
      }
      // The error's first sentence, without its file and hint.
      StringRef first = StringRef(errors).split('\n').first;
      first.consume_front("partc: error: ");
      first.consume_front(inputPath + ": ");
      first = first.split("; hint:").first;
      refusals.push_back(first.str());
      if (firstErrors.empty())
        firstErrors = errors;
      else
        firstErrors += "partc: note: the cost model's next layout, " +
                       c.label() + ", was refused too: " + first.str() + "\n";
      // Only memory depends on the layout; any other error is the model's.
      if (!first.contains("a training step needs"))
        break;
    }
    if (ranked->candidates.empty()) {
      if (failed(runPipeline(options)))
        return 1;
    } else if (chosen == ranked->candidates.size()) {
      if (firstErrors.empty())
        llvm::errs() << "partc: error: " << inputPath
                     << ": no training layout over the devices is possible "
                        "(why, below); choose a --batch that the devices "
                        "divide, or fewer --devices\n"
                     << mlir::partc::explainTrainingSearch(*ranked, chosen,
                                                           refusals);
      llvm::errs() << firstErrors;
      return 1;
    } else {
      llvm::errs() << warnings;
      const mlir::partc::TrainingCandidate &best = ranked->candidates[chosen];
      trainingChoice =
          "the cost model's " +
          std::string(refusals.empty() ? "best" : "best that fits") +
          " layout, " + best.label() + ", predicted step " +
          llvm::formatv("{0:f2}", best.stepSeconds * 1e3).str() + " ms";
      searchExplanation =
          mlir::partc::explainTrainingSearch(*ranked, chosen, refusals);
      // Worth saying without --explain: the user may expect N devices to
      // beat one.
      std::string faster = mlir::partc::oneDeviceNote(*ranked, chosen);
      if (!faster.empty() && !quiet && options.explain.empty())
        llvm::errs() << "partc: note: " << inputPath << ": " << faster << "\n";
    }
  } else {
    std::string diagnostics;
    LogicalResult compiled = runFitting(options, diagnostics);
    llvm::errs() << diagnostics;
    if (failed(compiled))
      return 1;
  }
  std::string recomputed = describeRecomputed(*module);
  if (emit != "plan")
    return writeModule(/*debugInfo=*/false);

  ::partc::runtime::Plan plan;
  std::vector<uint8_t> weights;
  if (failed(mlir::partc::exportPlan(*module, plan, weights)))
    return 1;
  // partc-run --save-onnx writes the trained weights into this model.
  if (train) {
    llvm::SmallString<256> source(inputPath);
    if (!llvm::sys::fs::make_absolute(source))
      llvm::sys::path::remove_dots(source, /*remove_dot_dot=*/true);
    plan.metadata["source_model"] = source.str().str();
  }
  if (!trainingChoice.empty())
    plan.metadata["training_choice"] = trainingChoice;
  if (!recomputed.empty())
    plan.metadata["recomputed"] = recomputed;
  ::partc::runtime::Status s =
      ::partc::runtime::writePlanFile(outputPath, plan);
  if (!s.ok())
    return fail(s.message());
  double ms = std::chrono::duration<double, std::milli>(
                  std::chrono::steady_clock::now() - start)
                  .count();
  if (options.explain == "text" && train) {
    printTrainingPlacement(plan);
    llvm::outs() << searchExplanation;
    printStepMemory(plan);
  }
  if (options.explain == "json" && train)
    printTrainingJson(plan);
  if (!quiet && options.explain != "json") {
    llvm::outs() << ::partc::runtime::summarizePlan(plan);
    llvm::outs() << "wrote " << outputPath << " in " << llvm::format("%.1f", ms)
                 << " ms\n";
  }
  return 0;
}

} // namespace

/// An allocation that fails is the model's size against this machine, not
/// a bug in partc: say so and exit 1 instead of aborting with a backtrace.
static void reportOutOfMemory(void *, const char *reason, bool) {
  llvm::errs() << "partc: error: " << inputPath
               << ": out of memory while compiling (" << reason
               << "); the model needs more memory than this machine has\n";
  std::_Exit(1);
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  llvm::install_bad_alloc_error_handler(reportOutOfMemory);
  if (argc < 2 || std::string(argv[1]) == "--help" ||
      std::string(argv[1]) == "-h") {
    llvm::outs() << "usage: partc compile MODEL.onnx -o MODEL.plan [options]\n"
                    "       partc ops    (list supported ONNX operators)\n"
                    "run 'partc compile --help' for the options\n";
    return argc < 2 ? 1 : 0;
  }
  std::string command = argv[1];
  if (command == "ops") {
    for (const std::string &op : mlir::partc::onnx_import::supportedOnnxOps())
      llvm::outs() << op << "\n";
    return 0;
  }
  if (command != "compile")
    return fail("unknown command '" + command + "'; expected compile or ops");
  // Parse the options after the command word.
  std::vector<char *> args = {argv[0]};
  for (int i = 2; i < argc; ++i)
    args.push_back(argv[i]);
  if (!cl::ParseCommandLineOptions(static_cast<int>(args.size()), args.data(),
                                   "partc compile\n", &llvm::errs()))
    return 1;
  return compile();
}

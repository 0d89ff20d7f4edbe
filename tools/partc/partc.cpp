//===- partc.cpp - The partc compiler driver ------------------------------===//
//
//   partc compile MODEL.onnx -o MODEL.plan [--devices N]
//         [--strategy single|pipeline|data] [--micro-batches M] [--batch B]
//         [--split-at NODE[,NODE...]] [--emit=plan|mlir|graph]
//         [--print-ir-after-all] [--quiet]
//
//===----------------------------------------------------------------------===//
#include "compiler/CostModel/OpCost.h"
#include "compiler/CostModel/Topology.h"
#include "compiler/Target/PlanExport.h"
#include "compiler/Transforms/PassUtils.h"
#include "compiler/Transforms/Passes.h"
#include "compiler/Transforms/PlanSearch.h"
#include "dialects/Graph/GraphOps.h"
#include "dialects/Plan/PlanDialect.h"
#include "frontends/onnx/OnnxImporter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>

using namespace mlir;
namespace cl = llvm::cl;

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
         cl::desc("plan (the plan file), mlir (plan dialect) or graph "
                  "(placed graph dialect)"),
         cl::init("plan"));
static cl::opt<bool> printIRAfterAll("print-ir-after-all",
                                     cl::desc("Print the IR after each pass"),
                                     cl::init(false));
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

/// Prints "partc: error: FILE: node 'NAME': message" so every diagnostic
/// names the model file and, where it has one, the ONNX node.
LogicalResult printDiagnostic(Diagnostic &diag) {
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
  llvm::errs() << "partc: " << severity << ": ";
  std::string file = fileOf(diag.getLocation());
  if (!file.empty())
    llvm::errs() << file << ": ";
  std::string node = mlir::partc::onnxNodeName(diag.getLocation());
  if (!node.empty())
    llvm::errs() << "node '" << node << "': ";
  llvm::errs() << diag.str() << "\n";
  for (Diagnostic &note : diag.getNotes())
    (void)printDiagnostic(note);
  return success();
}

int fail(const llvm::Twine &msg) {
  llvm::errs() << "partc: error: " << msg << "\n";
  return 1;
}

int compile() {
  if (devicesOpt == "0" || (!devicesOpt.empty() && devicesOpt[0] == '-'))
    return fail("--devices must be at least 1, got " + devicesOpt);
  auto topo = topologyPath.empty()
                  ? ::partc::costmodel::Topology::fromShorthand(devicesOpt)
                  : ::partc::costmodel::Topology::fromJsonFile(topologyPath);
  if (!topo)
    return fail(llvm::toString(topo.takeError()));
  int64_t numDevices = static_cast<int64_t>(topo->size());
  if (batch < 1)
    return fail("--batch must be at least 1, got " + llvm::Twine(batch));
  if (microBatches < 0)
    return fail("--micro-batches must be at least 1");
  if (stagesOpt < 0 || replicasOpt < 0)
    return fail("--stages and --replicas must be at least 1");
  if (std::max<int64_t>(stagesOpt, 1) * std::max<int64_t>(replicasOpt, 1) >
      numDevices)
    return fail("--stages " + llvm::Twine(std::max<int64_t>(stagesOpt, 1)) +
                " x --replicas " +
                llvm::Twine(std::max<int64_t>(replicasOpt, 1)) + " needs " +
                llvm::Twine(std::max<int64_t>(stagesOpt, 1) *
                            std::max<int64_t>(replicasOpt, 1)) +
                " devices, but --devices gives " + llvm::Twine(numDevices));
  std::string strat = strategy;
  if (!splitAt.empty() && strat == "auto")
    strat = "pipeline";
  if (strat != "auto" && strat != "single" && strat != "pipeline" &&
      strat != "data")
    return fail("unknown --strategy '" + strat +
                "'; expected auto, single, pipeline or data");
  if ((stagesOpt || replicasOpt) && strat != "auto")
    return fail(
        "--stages and --replicas constrain --strategy auto; --strategy " +
        strat + " sets them itself");
  if (strat == "single" && numDevices != 1)
    return fail("--strategy single uses one device, but --devices is " +
                llvm::Twine(numDevices));
  if (!splitAt.empty() && strat != "pipeline")
    return fail("--split-at applies to --strategy pipeline only");
  if (transfers != "p2p" && transfers != "nccl")
    return fail("unknown --transfers '" + transfers +
                "'; expected p2p (device-to-device copies) or nccl");
  if (objective != "throughput" && objective != "latency")
    return fail("--objective must be throughput or latency, got '" + objective +
                "'");
  if (layout != "nhwc" && layout != "nchw")
    return fail("--layout must be nhwc or nchw, got '" + layout + "'");
  std::string explainMode = explain;
  if (explain.getNumOccurrences() && explainMode.empty())
    explainMode = "text";
  if (!explainMode.empty() && explainMode != "text" && explainMode != "json")
    return fail("--explain takes text or json, got '" + explainMode + "'");
  ::partc::costmodel::CostTable costTable;
  // Several profiles (say, at batch 64 and at micro-batch sizes) merge.
  for (llvm::StringRef rest = costTablePath; !rest.empty();) {
    auto [file, tail] = rest.split(',');
    rest = tail;
    if (llvm::Error e = costTable.load(file.str()))
      return fail(llvm::toString(std::move(e)));
  }
  if (emit != "plan" && emit != "mlir" && emit != "graph")
    return fail("unknown --emit '" + emit + "'; expected plan, mlir or graph");

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
  for (const std::string &entry : constInputs) {
    size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0)
      return fail("--const-input expects NAME=FILE, got '" + entry + "'");
    importOptions.constantInputs[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  OwningOpRef<ModuleOp> module = mlir::partc::onnx_import::importOnnxFile(
      &context, inputPath, importOptions);
  if (!module)
    return 1;

  PassManager pm(&context);
  if (printIRAfterAll) {
    context.disableMultithreading();
    pm.enableIRPrinting([](Pass *, Operation *) { return false; },
                        [](Pass *, Operation *) { return true; },
                        /*printModuleScope=*/true,
                        /*printAfterOnlyOnChange=*/false);
  }
  pm.addPass(mlir::partc::createFoldConstants());
  if (layout == "nhwc")
    pm.addPass(mlir::partc::createConvertLayout());
  pm.addPass(mlir::partc::createFuseActivations());
  pm.addPass(mlir::partc::createFuseNormalizations());
  if (!noFoldMatMulViews)
    pm.addPass(mlir::partc::createFoldMatMulViews());
  if (!noFuseElementwise)
    pm.addPass(mlir::partc::createFuseElementwise());
  std::string planLabel = strat;
  std::optional<mlir::partc::SearchResult> searched;
  if (!splitAt.empty()) {
    mlir::partc::AssignDevicesOptions assign;
    assign.numDevices = numDevices;
    assign.splitAt.assign(splitAt.begin(), splitAt.end());
    pm.addPass(mlir::partc::createAssignDevices(assign));
    if (microBatches > 1)
      pm.addPass(mlir::partc::createSchedulePipeline({microBatches, "gpipe"}));
  } else {
    // The cost model places the graph; explicit strategies constrain it.
    if (failed(pm.run(*module)))
      return 1;
    pm.clear();
    mlir::partc::SearchOptions search;
    search.topology = *topo;
    search.objective = objective;
    search.costTable = costTable.empty() ? nullptr : &costTable;
    search.microBatches = microBatches;
    search.stages = stagesOpt;
    search.replicas = replicasOpt;
    if (strat == "single") {
      search.stages = search.replicas = 1;
    } else if (strat == "pipeline") {
      search.stages = numDevices;
      search.replicas = 1;
    } else if (strat == "data") {
      search.stages = 1;
      search.replicas = numDevices;
      search.microBatches = 1;
    }
    auto func = mlir::partc::getMainFunction(*module);
    if (failed(func))
      return 1;
    auto result = mlir::partc::searchPlan(*func, search);
    if (failed(result))
      return 1;
    if (failed(mlir::partc::applyPlan(*module, *func, result->best)))
      return 1;
    if (explainMode == "text")
      llvm::outs() << mlir::partc::explainText(*result);
    else if (explainMode == "json")
      llvm::outs() << mlir::partc::explainJson(*result);
    planLabel =
        (strat == "auto" ? "auto: " : strat + ": ") + result->best.label();
    searched = std::move(*result);
  }
  pm.addPass(mlir::partc::createInsertTransfers());
  pm.addPass(mlir::partc::createVerifyPlacement());
  if (emit != "graph") {
    pm.addPass(mlir::partc::createLowerToPlan({planLabel, transfers}));
    pm.addPass(mlir::partc::createPlanMemory());
  }
  if (failed(pm.run(*module)))
    return 1;

  std::string error;
  if (emit != "plan") {
    auto out = openOutputFile(outputPath, &error);
    if (!out)
      return fail("cannot write '" + outputPath + "': " + error);
    module->print(out->os());
    out->keep();
    return 0;
  }

  ::partc::runtime::Plan plan;
  std::vector<uint8_t> weights;
  if (failed(mlir::partc::exportPlan(*module, plan, weights)))
    return 1;
  plan.metadata["model"] = llvm::sys::path::filename(inputPath).str();
  plan.metadata["batch"] = std::to_string(batch);
  plan.metadata["micro_batches"] =
      std::to_string(searched ? searched->best.microBatches
                              : std::max<int64_t>(1, microBatches));
  if (searched) {
    // Predictions travel with the plan so partc-run can compare.
    plan.metadata["predicted_step_ms"] =
        std::to_string(searched->best.stepSeconds * 1e3);
    plan.metadata["predicted_period_ms"] =
        std::to_string(searched->best.periodSeconds * 1e3);
    plan.metadata["stages"] = std::to_string(searched->best.stages);
    std::string stages;
    for (const auto &st : searched->best.stageReports)
      stages += (stages.empty() ? "" : ",") + std::to_string(st.seconds * 1e3);
    plan.metadata["predicted_stage_ms"] = stages;
    // Which stage each plan device runs (replicas are chains of devices
    // over fast links, not necessarily consecutive indices).
    const auto &best = searched->best;
    std::vector<int64_t> stageOf(best.stages * best.replicas, 0);
    for (int64_t r = 0; r < best.replicas; ++r)
      for (int64_t k = 0; k < best.stages; ++k)
        if (best.device(r, k) < static_cast<int64_t>(stageOf.size()))
          stageOf[best.device(r, k)] = k;
    std::string deviceStages;
    for (int64_t k : stageOf)
      deviceStages += (deviceStages.empty() ? "" : ",") + std::to_string(k);
    plan.metadata["device_stages"] = deviceStages;
    plan.metadata["topology"] = searched->topology;
  }
  ::partc::runtime::Status s =
      ::partc::runtime::writePlanFile(outputPath, plan);
  if (!s.ok())
    return fail(s.message());
  double ms = std::chrono::duration<double, std::milli>(
                  std::chrono::steady_clock::now() - start)
                  .count();
  if (!quiet && explainMode != "json") {
    llvm::outs() << ::partc::runtime::summarizePlan(plan);
    llvm::outs() << "wrote " << outputPath << " in " << llvm::format("%.1f", ms)
                 << " ms\n";
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
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

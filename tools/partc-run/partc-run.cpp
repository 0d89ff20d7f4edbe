//===- partc-run.cpp - Executes a partc plan ------------------------------===//
//
//   partc-run MODEL.plan --backend cpu [--input NAME=FILE]... [--output-dir
//   DIR]
//             [--check DIR] [--rtol R] [--atol A] [--seed S] [--summary]
//             [--iterations N] [--warmup W]
//
// Parses options, reads the plan, runs it through the Executor of the
// backend asked for, and reports; test data and comparisons come from
// runtime/io/TestData.h.
//
//===----------------------------------------------------------------------===//
#include "runtime/Executor.h"
#include "runtime/io/Dataset.h"
#include "runtime/io/OnnxWeights.h"
#include "runtime/io/TestData.h"
#include "runtime/plan/Plan.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <set>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

using namespace partc::runtime;

namespace {

struct Options {
  std::string planPath;
  ExecutorOptions executor;
  std::vector<std::pair<std::string, std::string>> inputs;
  std::string outputDir, checkDir, profilePath, tracePath;
  double rtol = 1e-3, atol = 1e-7;
  uint64_t seed = 0;
  /// --seed given: it also seeds a training plan's dropout (rng.seed).
  bool seedGiven = false;
  bool summary = false, quiet = false;
  bool keepInputs = false, keepOutputs = false;
  bool stream = false;
  int iterations = 1, warmup = 0;
  /// Training: optimizer steps to run (0: not training), where the state
  /// is loaded from and saved to.
  int steps = 0;
  std::string loadStateDir, saveStateDir;
  /// Batches walked from files (--data), in order or shuffled, for
  /// `epochs` epochs (0: as --steps says, or one).
  std::string dataDir;
  bool shuffle = false;
  int epochs = 0;
  /// The trained model as ONNX, and the model the plan came from (the
  /// plan's record of it unless given).
  std::string saveOnnxPath, sourceModel;
};

void usage() {
  std::fprintf(
      stderr,
      "usage: partc-run MODEL.plan [--backend cpu] [--input NAME=FILE]...\n"
      "                 [--output-dir DIR] [--check DIR] [--rtol R] [--atol "
      "A]\n"
      "                 [--seed S] [--summary] [--quiet] [--iterations N] "
      "[--warmup W]\n"
      "                 [--precision fp32|tf32] (cuda: TF32 for matrix work, "
      "default tf32)\n"
      "                 [--keep-inputs] (cuda: time with inputs left on the "
      "GPU after the first run)\n"
      "                 [--keep-outputs] (with --stream: the timed batches "
      "leave their outputs on the\n"
      "                  GPU, as a PyTorch model returns them; the outputs "
      "printed and checked\n"
      "                  are the earlier, untimed runs')\n"
      "                 [--no-graphs] (cuda: launch kernels one by one instead "
      "of replaying a CUDA graph)\n"
      "                 [--no-fused-epilogues] (cuda: always run bias, "
      "residual and ReLU as their\n"
      "                  own pass after a convolution instead of choosing "
      "fused kernels by timing)\n"
      "                 [--no-cudnn-graph] (cuda: choose convolutions among "
      "the legacy cuDNN API's\n"
      "                  algorithms only, not also among its graph API's "
      "engine configurations;\n"
      "                  fused attention on partc's kernel only, not also "
      "cuDNN's)\n"
      "                 [--no-cudnn-knobs] (cuda: time the graph API's engine "
      "configurations as its\n"
      "                  heuristics set them, not also with one knob (split-K, "
      "tile shape...) moved)\n"
      "                 [--tune-each] (cuda: let identical kernels each keep "
      "its own tuning pick\n"
      "                  instead of all taking the one their pooled timings "
      "favour)\n"
      "                 [--no-branch-streams] (cuda: run branches the "
      "plan puts on streams of their\n"
      "                  own one after another on the device's stream)\n"
      "                 [--no-generated-chains] (cuda: interpret fused "
      "element-wise chains instead of\n"
      "                  compiling code for each at load with NVRTC)\n"
      "                 [--few-channel-rows] (cuda: also time the stem "
      "convolution kernel's rows form,\n"
      "                  not yet checked on a GPU)\n"
      "                 [--tuning-log] (cuda: print each tuned kernel's "
      "candidate times and pick)\n"
      "                 [--no-fill-kernels] (cuda: keep the memsets "
      "libraries enqueue as memset\n"
      "                  nodes of the CUDA graph instead of filling their "
      "bytes in kernel nodes)\n"
      "                 [--no-direct-transfers] (cuda, --stream: stage every "
      "transfer through\n"
      "                  copies of its own instead of letting kernels write "
      "and "
      "read the copied buffers)\n"
      "                 [--host-staging] (cuda: copy transfers through "
      "page-locked host memory,\n"
      "                  as between GPUs without peer access, even where "
      "they have it)\n"
      "                 [--devices-per-gpu K] (cuda: run K plan devices on "
      "each GPU, each on its own\n"
      "                  stream, e.g. a data-parallel plan for 2N devices "
      "on N GPUs)\n"
      "                 [--stream] (cuda: also run the iterations back to "
      "back, batches overlapping\n"
      "                  in pipeline stages, and print the throughput)\n"
      "                 [--step-timeout SECONDS] (give up a run or step "
      "still unfinished after this\n"
      "                  long, saying where each device got to; 0: never; "
      "default 300 on GPUs,\n"
      "                  none on the CPU)\n"
      "                 [--inject-fault error|hang:DEVICE[:STEP]] (testing: "
      "make DEVICE fail or stop\n"
      "                  before its first wait for another device in STEP "
      "(default 1), to check\n"
      "                  that the run ends naming it; a GPU error leaves that "
      "GPU unusable)\n"
      "                 [--profile FILE] (time every kernel after the warm-up "
      "runs; a cost table for partc compile --cost-table)\n"
      "Training plans (partc compile --train):\n"
      "                 [--steps N] (run N optimizer steps on the same "
      "inputs; prints each step's loss)\n"
      "                 [--data DIR] (walk batches from DIR/NAME.npy, one file "
      "per input and labels,\n"
      "                  each holding whole batches; one epoch unless "
      "--steps or --epochs)\n"
      "                 [--epochs E] [--shuffle] (with --data: E passes "
      "over the data, each in a\n"
      "                  new order drawn from --seed)\n"
      "                 [--seed S] (dropout's seed and --shuffle's; also the "
      "random inputs')\n"
      "                 [--load-state DIR] [--save-state DIR] (the "
      "parameters and the optimizer's\n"
      "                  state, one .npy per tensor, before and after the "
      "steps)\n"
      "                 [--save-onnx OUT.onnx] [--source-model MODEL.onnx] "
      "(the model the plan was\n"
      "                  compiled from, with the trained weights and "
      "running statistics)\n"
      "                 [--trace FILE.json] (Chrome/Perfetto trace of the last "
      "run, one track per device;\n"
      "                 with --stream: graph segments and copies of every "
      "batch)\n"
      "Inputs and outputs are ONNX TensorProto .pb or .npy files. Inputs not\n"
      "given are filled with seeded random data; --check compares with a\n"
      "test_data_set_N directory (and takes its inputs from there).\n");
}

int fail(const std::string &msg) {
  std::fprintf(stderr, "partc-run: error: %s\n", msg.c_str());
  return 1;
}

bool parseNumber(const char *s, double &out) {
  char *end;
  out = std::strtod(s, &end);
  return end != s && *end == 0;
}

/// --inject-fault KIND:DEVICE[:RUN], KIND error or hang.
Status parseFault(const std::string &text, FaultInjection &fault) {
  auto bad = [&] {
    return Status::error("--inject-fault expects error|hang:DEVICE[:STEP] "
                         "(a device number, a step from 1), got '" +
                         text + "'");
  };
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ':');)
    parts.push_back(part);
  if (parts.size() < 2 || parts.size() > 3)
    return bad();
  if (parts[0] == "error")
    fault.kind = FaultInjection::Kind::Error;
  else if (parts[0] == "hang")
    fault.kind = FaultInjection::Kind::Hang;
  else
    return bad();
  double device = 0, run = 1;
  if (!parseNumber(parts[1].c_str(), device) || device < 0 || device > 1e6 ||
      device != std::floor(device))
    return bad();
  if (parts.size() == 3 && (!parseNumber(parts[2].c_str(), run) || run < 1 ||
                            run > 1e9 || run != std::floor(run)))
    return bad();
  fault.device = static_cast<size_t>(device);
  fault.run = static_cast<size_t>(run);
  return Status();
}

/// A run's failure; where it left a device nothing can use (GPU work that
/// cannot be cancelled), exits at once instead of tearing the backend down.
int failRun(const Executor &exec, const std::string &msg) {
  int code = fail(msg);
  if (exec.lost()) {
    std::fflush(nullptr);
    std::_Exit(code);
  }
  return code;
}

Status parseArgs(int argc, char **argv, Options &o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](std::string &out) -> Status {
      size_t eq = a.find('=');
      if (eq != std::string::npos && a.rfind("--", 0) == 0 &&
          a.find('=') < a.size()) {
        std::string flag = a.substr(0, eq);
        if (flag != "--input") {
          out = a.substr(eq + 1);
          return Status();
        }
      }
      if (i + 1 >= argc)
        return Status::error("option " + a + " needs a value");
      out = argv[++i];
      return Status();
    };
    std::string flag = a.substr(0, a.find('='));
    std::string v;
    double num;
    CudaOptions &cuda = o.executor.cuda;
    if (flag == "--backend") {
      PARTC_RETURN_IF_ERROR(value(o.executor.backend));
    } else if (flag == "--precision") {
      PARTC_RETURN_IF_ERROR(value(v));
      if (v != "fp32" && v != "tf32")
        return Status::error("--precision expects fp32 or tf32, got '" + v +
                             "'");
      cuda.tf32 = v == "tf32";
    } else if (a == "--input") {
      PARTC_RETURN_IF_ERROR(value(v));
      size_t eq = v.find('=');
      if (eq == std::string::npos || eq == 0)
        return Status::error("--input expects NAME=FILE, got '" + v + "'");
      o.inputs.push_back({v.substr(0, eq), v.substr(eq + 1)});
    } else if (flag == "--output-dir") {
      PARTC_RETURN_IF_ERROR(value(o.outputDir));
    } else if (flag == "--check") {
      PARTC_RETURN_IF_ERROR(value(o.checkDir));
    } else if (flag == "--profile") {
      PARTC_RETURN_IF_ERROR(value(o.profilePath));
    } else if (flag == "--trace") {
      PARTC_RETURN_IF_ERROR(value(o.tracePath));
    } else if (flag == "--rtol" || flag == "--atol" || flag == "--seed" ||
               flag == "--iterations" || flag == "--warmup" ||
               flag == "--steps" || flag == "--epochs") {
      PARTC_RETURN_IF_ERROR(value(v));
      if (!parseNumber(v.c_str(), num) || !(num >= 0) || std::isinf(num))
        return Status::error("option " + flag +
                             " expects a non-negative "
                             "number, got '" +
                             v + "'");
      // Counts are whole numbers an int holds (a cast of 1e20 is undefined).
      bool count = flag == "--iterations" || flag == "--warmup" ||
                   flag == "--steps" || flag == "--epochs";
      if (count && (num > 1e9 || num != std::floor(num)))
        return Status::error("option " + flag +
                             " expects a whole number up to 10^9, got '" + v +
                             "'");
      if (flag == "--rtol")
        o.rtol = num;
      else if (flag == "--atol")
        o.atol = num;
      else if (flag == "--seed" && num >= 0x1p64)
        return Status::error("--seed expects a number below 2^64, got '" + v +
                             "'");
      else if (flag == "--seed") {
        o.seed = static_cast<uint64_t>(num);
        o.seedGiven = true;
      } else if (flag == "--iterations")
        o.iterations = std::max(1, static_cast<int>(num));
      else if (flag == "--steps")
        o.steps = static_cast<int>(num);
      else if (flag == "--epochs")
        o.epochs = static_cast<int>(num);
      else
        o.warmup = static_cast<int>(num);
    } else if (flag == "--load-state") {
      PARTC_RETURN_IF_ERROR(value(o.loadStateDir));
    } else if (flag == "--save-state") {
      PARTC_RETURN_IF_ERROR(value(o.saveStateDir));
    } else if (flag == "--data") {
      PARTC_RETURN_IF_ERROR(value(o.dataDir));
    } else if (a == "--shuffle") {
      o.shuffle = true;
    } else if (flag == "--save-onnx") {
      PARTC_RETURN_IF_ERROR(value(o.saveOnnxPath));
    } else if (flag == "--source-model") {
      PARTC_RETURN_IF_ERROR(value(o.sourceModel));
    } else if (a == "--summary") {
      o.summary = true;
    } else if (a == "--quiet") {
      o.quiet = true;
    } else if (a == "--keep-inputs") {
      o.keepInputs = true;
    } else if (a == "--keep-outputs") {
      o.keepOutputs = true;
    } else if (a == "--no-graphs") {
      cuda.graphs = false;
    } else if (a == "--no-fused-epilogues") {
      cuda.fuseEpilogues = false;
    } else if (a == "--no-cudnn-graph") {
      cuda.cudnnGraph = false;
    } else if (a == "--no-cudnn-knobs") {
      cuda.cudnnKnobs = false;
    } else if (a == "--tune-each") {
      cuda.poolTwins = false;
    } else if (a == "--no-branch-streams") {
      cuda.branchStreams = false;
    } else if (a == "--no-generated-chains") {
      cuda.generatedChains = false;
    } else if (a == "--few-channel-rows") {
      cuda.fewChannelRows = true;
    } else if (a == "--tuning-log") {
      cuda.logTuning = true;
    } else if (a == "--no-fill-kernels") {
      cuda.fillKernels = false;
    } else if (a == "--no-direct-transfers") {
      cuda.directTransfers = false;
    } else if (flag == "--devices-per-gpu") {
      PARTC_RETURN_IF_ERROR(value(v));
      if (!parseNumber(v.c_str(), num) || num < 1 || num > 64 ||
          num != static_cast<int>(num))
        return Status::error("--devices-per-gpu expects a whole number from "
                             "1 to 64, got '" +
                             v + "'");
      cuda.devicesPerGpu = static_cast<int>(num);
    } else if (a == "--host-staging") {
      cuda.hostStaging = true;
    } else if (flag == "--step-timeout") {
      PARTC_RETURN_IF_ERROR(value(v));
      if (!parseNumber(v.c_str(), num) || !(num >= 0) || num > 1e7)
        return Status::error("--step-timeout expects seconds from 0 (none) "
                             "to 10^7, got '" +
                             v + "'");
      o.executor.failure.stepTimeoutSeconds = num;
    } else if (flag == "--inject-fault") {
      PARTC_RETURN_IF_ERROR(value(v));
      PARTC_RETURN_IF_ERROR(parseFault(v, o.executor.failure.fault));
    } else if (a == "--stream") {
      o.stream = true;
    } else if (a == "-h" || a == "--help") {
      usage();
      std::exit(0);
    } else if (!a.empty() && a[0] == '-') {
      return Status::error("unknown option '" + a + "'");
    } else if (o.planPath.empty()) {
      o.planPath = a;
    } else {
      return Status::error("unexpected argument '" + a + "'");
    }
  }
  if (o.planPath.empty())
    return Status::error("no plan file given");
  if ((o.shuffle || o.epochs) && o.dataDir.empty())
    return Status::error("--shuffle and --epochs walk the batches of --data "
                         "DIR; give --data");
  if (o.epochs && o.steps)
    return Status::error("give --steps or --epochs, not both (--epochs E "
                         "runs E times the batches in --data)");
  std::vector<std::string> backends = availableBackends();
  if (std::find(backends.begin(), backends.end(), o.executor.backend) ==
      backends.end()) {
    std::string names;
    for (const std::string &b : backends)
      names += (names.empty() ? "" : ", ") + b;
    return Status::error(
        "backend '" + o.executor.backend +
        "' is not available in this build (available: " + names + ")");
  }
  return Status();
}

/// A state tensor's file in a state directory: its name with every byte
/// outside [A-Za-z0-9._-] written as _XX, so names with slashes stay one
/// file.
std::string stateFile(const std::string &dir, const std::string &name) {
  static const char *hex = "0123456789abcdef";
  std::string file;
  for (unsigned char c : name) {
    if (std::isalnum(c) || c == '.' || c == '-')
      file += static_cast<char>(c);
    else
      file += std::string("_") + hex[c >> 4] + hex[c & 15];
  }
  return dir + "/" + file + ".npy";
}

/// A data-parallel plan keeps a state on every replica: the first (the
/// lowest device's, rank 0's as DistributedDataParallel saves) is saved, and
/// a loaded one goes to every replica.
Status saveState(const Plan &plan, const Executor &exec,
                 const std::string &dir) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    return Status::error("cannot create '" + dir +
                         "': " + std::strerror(errno));
  std::set<std::string> saved;
  for (size_t i = 0; i < plan.states.size(); ++i) {
    if (!saved.insert(plan.states[i].name).second)
      continue;
    HostTensor t;
    t.name = plan.states[i].name;
    t.type = plan.states[i].type;
    t.data.resize(t.type.byteSize());
    PARTC_RETURN_IF_ERROR(exec.readState(i, t.data.data()));
    PARTC_RETURN_IF_ERROR(writeTensorFile(stateFile(dir, t.name), t));
  }
  return Status();
}

Status loadState(const Plan &plan, Executor &exec, const std::string &dir) {
  for (size_t i = 0; i < plan.states.size(); ++i) {
    const StateDecl &decl = plan.states[i];
    std::string path = stateFile(dir, decl.name);
    HostTensor t;
    PARTC_RETURN_IF_ERROR(
        readTensorFile(path, t, tensorFileLimit(decl.type.byteSize())));
    if (t.type != decl.type)
      return Status::error("'" + path + "' holds " + t.type.str() +
                           ", but the plan's state '" + decl.name + "' is " +
                           decl.type.str());
    PARTC_RETURN_IF_ERROR(exec.writeState(i, t.data.data()));
  }
  return Status();
}

/// The trained parameters and running statistics as the ONNX model they
/// came from (states whose role names an initializer; a state kept on
/// several devices is written once).
Status saveOnnx(const Options &opts, const Plan &plan, const Executor &exec) {
  std::string model = opts.sourceModel;
  if (model.empty()) {
    auto it = plan.metadata.find("source_model");
    if (it == plan.metadata.end())
      return Status::error("'" + opts.planPath +
                           "' does not record the model it was compiled "
                           "from; give it with --source-model MODEL.onnx");
    model = it->second;
  }
  std::vector<HostTensor> values;
  for (size_t i = 0; i < plan.states.size(); ++i) {
    const StateDecl &decl = plan.states[i];
    if (decl.role != "parameter" && decl.role != "running_mean" &&
        decl.role != "running_var")
      continue;
    if (std::any_of(values.begin(), values.end(),
                    [&](const HostTensor &v) { return v.name == decl.name; }))
      continue;
    HostTensor t;
    t.name = decl.name;
    t.type = decl.type;
    t.data.resize(t.type.byteSize());
    PARTC_RETURN_IF_ERROR(exec.readState(i, t.data.data()));
    values.push_back(std::move(t));
  }
  return writeOnnxWithInitializers(model, opts.saveOnnxPath, values)
      .prepend("--save-onnx");
}

/// A bar on the terminal below the step lines: drawn on stderr, wiped
/// before each line so that it stays the last.
class ProgressBar {
public:
  ProgressBar(bool enabled, int total) : enabled_(enabled), total_(total) {}
  void clear() const {
    if (enabled_)
      std::fprintf(stderr, "\r\033[K");
  }
  void draw(int done, double loss, double msPerStep) const {
    if (!enabled_)
      return;
    constexpr int kWidth = 30;
    int filled = total_ ? static_cast<int>(int64_t(done) * kWidth / total_) : 0;
    std::fprintf(stderr, "\r[%s%s] %d/%d loss %.4g %.1f ms/step",
                 std::string(static_cast<size_t>(filled), '#').c_str(),
                 std::string(static_cast<size_t>(kWidth - filled), ' ').c_str(),
                 done, total_, loss, msPerStep);
    std::fflush(stderr);
  }

private:
  bool enabled_;
  int total_;
};

/// Optimizer steps, each printing its loss: on the same inputs, or on the
/// batches of `data` (each epoch's mean loss too).
Status runSteps(const Options &opts, const Plan &plan, Executor &exec,
                std::vector<HostTensor> &inputs,
                const std::vector<TensorRef> &in,
                const std::vector<TensorRef> &out, Dataset *data, int steps,
                double &afterFirstMs, double &afterSecondMs) {
  size_t lossIndex = plan.outputs.size();
  for (size_t i = 0; i < plan.outputs.size(); ++i)
    if (plan.outputs[i].name == "loss" &&
        plan.outputs[i].type.numElements() == 1 &&
        plan.outputs[i].type.dtype == DType::F32)
      lossIndex = i;
  ProgressBar bar(!opts.quiet && isatty(STDERR_FILENO) && steps > 1, steps);
  int64_t perEpoch = data ? data->batchesPerEpoch() : 0;
  double epochLoss = 0;
  auto start = std::chrono::steady_clock::now(), firstDone = start,
       secondDone = start;
  for (int step = 1; step <= steps; ++step) {
    if (data) {
      int64_t epoch = (step - 1) / perEpoch, batch = (step - 1) % perEpoch;
      if (batch == 0) {
        data->startEpoch(static_cast<uint64_t>(epoch), opts.shuffle, opts.seed);
        epochLoss = 0;
      }
      data->fillBatch(batch, inputs);
    }
    // Profile every step but the first (library algorithm searches).
    if (step == std::min(2, steps) && !opts.profilePath.empty())
      PARTC_RETURN_IF_ERROR(exec.enableProfiling());
    // The trace is of the last step (after the first's searches).
    if (step == steps && steps > 1 && !opts.tracePath.empty())
      PARTC_RETURN_IF_ERROR(exec.enableTracing());
    // The same batch every step stays on the device after the first
    // (input buffers are never reused within a step); batches from --data
    // are copied each step.
    PARTC_RETURN_IF_ERROR(exec.run(in, out, !data && step > 1));
    if (lossIndex >= out.size())
      continue;
    float loss = out[lossIndex].as<float>()[0];
    bar.clear();
    std::printf("step %d loss %.9g\n", step, static_cast<double>(loss));
    if (!std::isfinite(loss))
      std::fprintf(stderr,
                   "partc-run: warning: the loss of step %d is %g; lower "
                   "--lr or check the inputs\n",
                   step, static_cast<double>(loss));
    epochLoss += loss;
    if (data && step % perEpoch == 0)
      std::printf("epoch %lld mean loss %.9g (%lld steps)\n",
                  static_cast<long long>(step / perEpoch),
                  epochLoss / static_cast<double>(perEpoch),
                  static_cast<long long>(perEpoch));
    std::fflush(stdout);
    auto now = std::chrono::steady_clock::now();
    double ms = std::chrono::duration<double, std::milli>(now - start).count();
    // The first step chooses library algorithms; the second captures the
    // CUDA graphs the others replay.
    if (step == 1)
      firstDone = now;
    if (step == 2)
      secondDone = now;
    afterFirstMs =
        std::chrono::duration<double, std::milli>(now - firstDone).count();
    afterSecondMs =
        std::chrono::duration<double, std::milli>(now - secondDone).count();
    bar.draw(step, loss, ms / step);
  }
  bar.clear();
  return Status();
}

} // namespace

/// Per device: the compiler's predicted busy time per batch (its stage's
/// time per micro-batch times the micro-batches) against the kernel time
/// measured by --profile.
void printStageComparison(
    const Plan &plan, const std::function<double(size_t, size_t)> &seconds) {
  auto stageMs = plan.metadata.find("predicted_stage_ms");
  if (stageMs == plan.metadata.end() || !seconds)
    return;
  std::vector<double> predicted;
  std::stringstream list(stageMs->second);
  for (std::string item; std::getline(list, item, ',');)
    predicted.push_back(std::atof(item.c_str()));
  if (predicted.empty())
    return;
  auto meta = [&](const char *key, size_t dflt) {
    auto it = plan.metadata.find(key);
    return it == plan.metadata.end()
               ? dflt
               : static_cast<size_t>(std::atoll(it->second.c_str()));
  };
  size_t stages = std::max<size_t>(1, meta("stages", predicted.size()));
  size_t microBatches = std::max<size_t>(1, meta("micro_batches", 1));
  std::vector<size_t> stageOf;
  if (auto it = plan.metadata.find("device_stages");
      it != plan.metadata.end()) {
    std::stringstream items(it->second);
    for (std::string item; std::getline(items, item, ',');)
      stageOf.push_back(static_cast<size_t>(std::atoll(item.c_str())));
  }
  std::printf("per device, kernels only: predicted vs measured ms per batch\n");
  for (size_t d = 0; d < plan.devices.size(); ++d) {
    double measured = 0;
    for (size_t i = 0; i < plan.devices[d].instructions.size(); ++i)
      if (plan.devices[d].instructions[i].op == OpCode::Kernel)
        measured += seconds(d, i);
    size_t stage = d < stageOf.size() ? stageOf[d] : d % stages;
    double want = stage < predicted.size()
                      ? predicted[stage] * static_cast<double>(microBatches)
                      : 0;
    std::printf("  device %zu (stage %zu): predicted %.3f, measured %.3f "
                "(%.2fx)\n",
                d, stage, want, measured * 1e3,
                want > 0 ? measured * 1e3 / want : 0.0);
  }
}

/// The plan run `warmup` + `iterations` times, timed; profiled and traced
/// as asked.
Status runTimed(const Options &opts, const Plan &plan, Executor &exec,
                const std::vector<TensorRef> &in,
                const std::vector<TensorRef> &out, std::vector<double> &times) {
  for (int it = 0; it < opts.warmup + opts.iterations; ++it) {
    if (it == opts.warmup && !opts.profilePath.empty()) {
      // Profile only the timed runs.
      PARTC_RETURN_IF_ERROR(exec.enableProfiling());
      std::string note = exec.profilingNote();
      if (!note.empty() && !opts.quiet) {
        std::stringstream lines(note);
        for (std::string line; std::getline(lines, line);)
          std::fprintf(stderr, "partc-run: %s\n", line.c_str());
      }
    }
    bool last = it + 1 == opts.warmup + opts.iterations;
    if (last && !opts.tracePath.empty() && !opts.stream)
      PARTC_RETURN_IF_ERROR(exec.enableTracing());
    auto t0 = std::chrono::steady_clock::now();
    PARTC_RETURN_IF_ERROR(exec.run(in, out, opts.keepInputs && it > 0));
    auto t1 = std::chrono::steady_clock::now();
    if (it >= opts.warmup)
      times.push_back(
          std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  return Status();
}

/// Batches back to back: once to build what streaming replays, then timed,
/// then, with a trace, once more recorded.
Status runStreamed(const Options &opts, const Plan &plan, Executor &exec,
                   const std::vector<TensorRef> &in,
                   const std::vector<TensorRef> &out) {
  size_t n = static_cast<size_t>(opts.iterations);
  PARTC_RETURN_IF_ERROR(exec.runStream(in, out, std::min<size_t>(n, 4),
                                       opts.keepInputs, opts.keepOutputs));
  auto t0 = std::chrono::steady_clock::now();
  PARTC_RETURN_IF_ERROR(
      exec.runStream(in, out, n, opts.keepInputs, opts.keepOutputs));
  double ms = std::chrono::duration<double, std::milli>(
                  std::chrono::steady_clock::now() - t0)
                  .count();
  int64_t batch = plan.inputs.empty() || plan.inputs[0].type.shape.empty()
                      ? 1
                      : plan.inputs[0].type.shape[0];
  std::printf("stream: %zu batches in %.3f ms: %.3f ms per batch, %.1f "
              "samples/s\n",
              n, ms, ms / static_cast<double>(n),
              static_cast<double>(batch) * static_cast<double>(n) * 1e3 / ms);
  auto period = plan.metadata.find("predicted_period_ms");
  if (period != plan.metadata.end())
    std::printf("predicted period %.3f ms, measured %.3f ms\n",
                std::atof(period->second.c_str()), ms / static_cast<double>(n));
  if (!opts.tracePath.empty()) {
    // A separate run, so that the timing events do not touch the figure
    // above.
    exec.enableStreamTracing();
    PARTC_RETURN_IF_ERROR(
        exec.runStream(in, out, n, opts.keepInputs, opts.keepOutputs));
  }
  return Status();
}

int main(int argc, char **argv) {
  Options opts;
  Status s = parseArgs(argc, argv, opts);
  if (!s.ok()) {
    usage();
    return fail(s.message());
  }
  if (opts.stream && opts.executor.backend != "cuda")
    return fail("--stream needs --backend cuda (the CPU reference runs one "
                "batch at a time)");
  if (opts.keepOutputs && !opts.stream)
    return fail("--keep-outputs times streamed batches; add --stream");
  if (opts.stream && !opts.profilePath.empty())
    return fail("--stream cannot be combined with --profile (profile one "
                "batch at a time; --trace shows a streamed run)");
  Plan plan;
  s = readPlanFile(opts.planPath, plan);
  if (!s.ok())
    return fail(s.message());
  if (opts.summary)
    std::printf("%s", summarizePlan(plan).c_str());

  // Inputs: explicit files, then the check directory, then random data.
  std::vector<HostTensor> inputs;
  s = loadInputs(plan, opts.inputs, opts.checkDir, opts.seed, inputs);
  if (!s.ok())
    return fail(s.message());

  std::unique_ptr<Executor> exec;
  s = createExecutor(plan, opts.executor, exec);
  if (!s.ok())
    return fail(s.message());
  if (!opts.quiet) {
    LoadReport report = exec->loadReport();
    for (const std::string &note : report.notes)
      std::fprintf(stderr, "partc-run: note: %s\n", note.c_str());
    if (opts.summary)
      for (const std::string &detail : report.details)
        std::fprintf(stderr, "partc-run: %s\n", detail.c_str());
  }

  std::vector<HostTensor> outputs = allocateOutputs(plan);
  std::vector<TensorRef> inRefs, outRefs;
  for (auto &t : inputs)
    inRefs.push_back(t.ref());
  for (auto &t : outputs)
    outRefs.push_back(t.ref());
  for (auto *list : {&inputs, &outputs})
    for (auto &t : *list)
      if (Status r = exec->registerHostMemory(t.data.data(), t.data.size());
          !r.ok())
        return fail(r.message());

  bool training = !plan.states.empty();
  if ((opts.steps || !opts.loadStateDir.empty() || !opts.saveStateDir.empty() ||
       !opts.dataDir.empty() || !opts.saveOnnxPath.empty()) &&
      !training)
    return fail("'" + opts.planPath +
                "' is not a training plan (it has no state); compile the "
                "model with partc compile --train");
  if (training && (opts.iterations > 1 || opts.warmup > 0 || opts.stream))
    return fail("--iterations, --warmup and --stream time inference plans; "
                "a training plan runs --steps");
  if (!opts.loadStateDir.empty()) {
    s = loadState(plan, *exec, opts.loadStateDir);
    if (!s.ok())
      return fail(s.message());
  }
  // The run's seed replaces the compiled one (and a loaded one).
  for (size_t i = 0; opts.seedGiven && i < plan.states.size(); ++i)
    if (plan.states[i].name == "rng.seed") {
      int64_t seed = static_cast<int64_t>(opts.seed);
      if (s = exec->writeState(i, &seed); !s.ok())
        return fail(s.message());
    }
  Dataset data;
  int steps = opts.steps;
  if (!opts.dataDir.empty()) {
    std::vector<std::string> given;
    for (const auto &input : opts.inputs)
      given.push_back(input.first);
    if (s = Dataset::open(opts.dataDir, plan, given, data); !s.ok())
      return fail(s.message());
    // One epoch unless told otherwise; --epochs E is E times the batches.
    int64_t total = opts.steps
                        ? opts.steps
                        : std::max(1, opts.epochs) * data.batchesPerEpoch();
    if (total > 1000000000)
      return fail("--epochs " + std::to_string(opts.epochs) + " over " +
                  std::to_string(data.batchesPerEpoch()) +
                  " batches is more than 10^9 steps");
    steps = static_cast<int>(total);
  }
  std::vector<double> times;
  if (training && steps > 0) {
    auto t0 = std::chrono::steady_clock::now();
    double afterFirstMs = 0, afterSecondMs = 0;
    s = runSteps(opts, plan, *exec, inputs, inRefs, outRefs,
                 opts.dataDir.empty() ? nullptr : &data, steps, afterFirstMs,
                 afterSecondMs);
    if (!s.ok())
      return failRun(*exec, s.message());
    double ms = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - t0)
                    .count();
    if (!opts.quiet && steps > 2)
      std::printf("%d steps in %.3f ms (%.3f ms per step; %.3f after the "
                  "first; %.3f after the second)\n",
                  steps, ms, ms / steps, afterFirstMs / (steps - 1),
                  afterSecondMs / (steps - 2));
    else if (!opts.quiet && steps > 1)
      std::printf("%d steps in %.3f ms (%.3f ms per step; %.3f after the "
                  "first)\n",
                  steps, ms, ms / steps, afterFirstMs / (steps - 1));
    else if (!opts.quiet)
      std::printf("%d steps in %.3f ms\n", steps, ms);
  } else {
    s = runTimed(opts, plan, *exec, inRefs, outRefs, times);
    if (!s.ok())
      return failRun(*exec, s.message());
  }
  if (!opts.saveStateDir.empty()) {
    s = saveState(plan, *exec, opts.saveStateDir);
    if (!s.ok())
      return fail(s.message());
  }
  if (!opts.saveOnnxPath.empty()) {
    s = saveOnnx(opts, plan, *exec);
    if (!s.ok())
      return fail(s.message());
  }
  if (!opts.quiet)
    for (const std::string &note : exec->runNotes())
      std::fprintf(stderr, "partc-run: note: %s\n", note.c_str());
  std::sort(times.begin(), times.end());
  if (!times.empty() && (opts.iterations > 1 || opts.warmup > 0))
    std::printf("latency ms: p50 %.3f p90 %.3f min %.3f (%zu iterations)\n",
                times[times.size() / 2], times[times.size() * 9 / 10],
                times.front(), times.size());
  if (opts.stream) {
    s = runStreamed(opts, plan, *exec, inRefs, outRefs);
    if (!s.ok())
      return failRun(*exec, s.message());
  }

  std::function<double(size_t, size_t)> kernelSeconds;
  std::function<const char *(size_t, size_t)> kernelVariant;
  if (!opts.profilePath.empty()) {
    kernelSeconds = [&](size_t d, size_t i) {
      return exec->kernelSeconds(d, i);
    };
    kernelVariant = [&](size_t d, size_t i) {
      return exec->kernelVariant(d, i);
    };
  }
  const std::string &backend = opts.executor.backend;
  if (!opts.tracePath.empty()) {
    s = writeTrace(opts.tracePath, plan, backend, exec->lastRunTrace());
    if (!s.ok())
      return fail(s.message());
  }
  if (!opts.profilePath.empty()) {
    s = writeProfile(opts.profilePath, plan, backend, kernelSeconds,
                     kernelVariant);
    if (!s.ok())
      return fail(s.message());
    printStageComparison(plan, kernelSeconds);
  }
  auto predicted = plan.metadata.find("predicted_step_ms");
  if (!times.empty() && (opts.iterations > 1 || opts.warmup > 0) &&
      predicted != plan.metadata.end())
    std::printf("predicted step %.3f ms, measured p50 %.3f ms\n",
                std::atof(predicted->second.c_str()), times[times.size() / 2]);
  if (!opts.quiet)
    for (const HostTensor &t : outputs)
      std::printf("%s\n", describeTensor(t).c_str());
  if (!opts.outputDir.empty()) {
    s = writeTestData(opts.outputDir, inputs, outputs);
    if (!s.ok())
      return fail(s.message());
  }
  if (!opts.checkDir.empty()) {
    std::vector<std::string> mismatches;
    s = compareWithTestData(opts.checkDir, outputs, opts.rtol, opts.atol,
                            mismatches);
    if (!s.ok())
      return fail(s.message());
    for (const std::string &m : mismatches)
      std::fprintf(stderr, "partc-run: %s\n", m.c_str());
    if (!mismatches.empty())
      return 2;
    std::printf("check passed: %zu output(s) match %s\n", outputs.size(),
                opts.checkDir.c_str());
  }
  return 0;
}

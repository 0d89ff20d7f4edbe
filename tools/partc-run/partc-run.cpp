//===- partc-run.cpp - Executes a partc plan ------------------------------===//
//
//   partc-run MODEL.plan --backend cpu [--input NAME=FILE]... [--output-dir
//   DIR]
//             [--check DIR] [--rtol R] [--atol A] [--seed S] [--summary]
//             [--iterations N] [--warmup W]
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/CpuExecutor.h"
#include "runtime/io/TensorFile.h"
#include "runtime/kernels/Kernel.h"
#include "runtime/plan/Plan.h"
#ifdef PARTC_HAVE_CUDA
#include "runtime/cuda/ChainCodegen.h"
#include "runtime/cuda/CudaExecutor.h"
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <functional>
#include <map>
#include <random>
#include <sstream>
#include <sys/stat.h>

using namespace partc::runtime;

namespace {

struct Options {
  std::string planPath;
  std::string backend = "cpu";
  std::vector<std::pair<std::string, std::string>> inputs;
  std::string outputDir, checkDir, profilePath, tracePath;
  double rtol = 1e-3, atol = 1e-7;
  uint64_t seed = 0;
  bool summary = false, quiet = false;
  std::string precision = "tf32";
  bool keepInputs = false;
  bool graphs = true;
  bool fuseEpilogues = true;
  bool cudnnGraph = true, cudnnKnobs = true, generatedChains = true;
  bool directTransfers = true;
  bool hostStaging = false;
  int devicesPerGpu = 1;
  bool stream = false;
  int iterations = 1, warmup = 0;
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
      "                 [--no-graphs] (cuda: launch kernels one by one instead "
      "of replaying a CUDA graph)\n"
      "                 [--no-fused-epilogues] (cuda: always run bias, "
      "residual and ReLU as their\n"
      "                  own pass after a convolution instead of choosing "
      "fused kernels by timing)\n"
      "                 [--no-cudnn-graph] (cuda: choose convolutions among "
      "the legacy cuDNN API's\n"
      "                  algorithms only, not also among its graph API's "
      "engine configurations)\n"
      "                 [--no-cudnn-knobs] (cuda: time the graph API's engine "
      "configurations as its\n"
      "                  heuristics set them, not also with one knob (split-K, "
      "tile shape...) moved)\n"
      "                 [--no-generated-chains] (cuda: interpret fused "
      "element-wise chains instead of\n"
      "                  compiling code for each at load with NVRTC)\n"
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
      "                 [--profile FILE] (time every kernel after the warm-up "
      "runs; a cost table for partc compile --cost-table)\n"
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
    if (flag == "--backend") {
      PARTC_RETURN_IF_ERROR(value(o.backend));
    } else if (flag == "--precision") {
      PARTC_RETURN_IF_ERROR(value(o.precision));
      if (o.precision != "fp32" && o.precision != "tf32")
        return Status::error("--precision expects fp32 or tf32, got '" +
                             o.precision + "'");
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
               flag == "--iterations" || flag == "--warmup") {
      PARTC_RETURN_IF_ERROR(value(v));
      if (!parseNumber(v.c_str(), num) || num < 0)
        return Status::error("option " + flag +
                             " expects a non-negative "
                             "number, got '" +
                             v + "'");
      if (flag == "--rtol")
        o.rtol = num;
      else if (flag == "--atol")
        o.atol = num;
      else if (flag == "--seed")
        o.seed = static_cast<uint64_t>(num);
      else if (flag == "--iterations")
        o.iterations = std::max(1, static_cast<int>(num));
      else
        o.warmup = static_cast<int>(num);
    } else if (a == "--summary") {
      o.summary = true;
    } else if (a == "--quiet") {
      o.quiet = true;
    } else if (a == "--keep-inputs") {
      o.keepInputs = true;
    } else if (a == "--no-graphs") {
      o.graphs = false;
    } else if (a == "--no-fused-epilogues") {
      o.fuseEpilogues = false;
    } else if (a == "--no-cudnn-graph") {
      o.cudnnGraph = false;
    } else if (a == "--no-cudnn-knobs") {
      o.cudnnKnobs = false;
    } else if (a == "--no-generated-chains") {
      o.generatedChains = false;
    } else if (a == "--no-direct-transfers") {
      o.directTransfers = false;
    } else if (flag == "--devices-per-gpu") {
      PARTC_RETURN_IF_ERROR(value(v));
      if (!parseNumber(v.c_str(), num) || num < 1 || num > 64 ||
          num != static_cast<int>(num))
        return Status::error("--devices-per-gpu expects a whole number from "
                             "1 to 64, got '" +
                             v + "'");
      o.devicesPerGpu = static_cast<int>(num);
    } else if (a == "--host-staging") {
      o.hostStaging = true;
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
#ifdef PARTC_HAVE_CUDA
  const char *available = "cpu, cuda";
  bool known = o.backend == "cpu" || o.backend == "cuda";
#else
  const char *available = "cpu";
  bool known = o.backend == "cpu";
#endif
  if (!known)
    return Status::error(
        "backend '" + o.backend +
        "' is not available in this build (available: " + available + ")");
  return Status();
}

/// Files named PREFIX_N.pb in `dir`, ordered by N.
std::vector<std::string> numberedFiles(const std::string &dir,
                                       const std::string &prefix) {
  std::vector<std::pair<int, std::string>> found;
  if (DIR *d = opendir(dir.c_str())) {
    while (dirent *e = readdir(d)) {
      std::string name = e->d_name;
      if (name.rfind(prefix + "_", 0) == 0 && name.size() > 3 &&
          name.substr(name.size() - 3) == ".pb") {
        std::string num =
            name.substr(prefix.size() + 1, name.size() - prefix.size() - 4);
        if (!num.empty() &&
            num.find_first_not_of("0123456789") == std::string::npos)
          found.push_back({std::stoi(num), dir + "/" + name});
      }
    }
    closedir(d);
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> files;
  for (auto &f : found)
    files.push_back(f.second);
  return files;
}

void fillRandom(HostTensor &t, std::mt19937_64 &rng) {
  size_t n = t.type.numElements();
  std::uniform_real_distribution<double> real(-1.0, 1.0);
  std::uniform_int_distribution<int> small(0, 3);
  for (size_t i = 0; i < n; ++i) {
    uint8_t *p = t.data.data() + i * dtypeSize(t.type.dtype);
    switch (t.type.dtype) {
    case DType::F32: {
      float v = static_cast<float>(real(rng));
      std::memcpy(p, &v, 4);
      break;
    }
    case DType::F64: {
      double v = real(rng);
      std::memcpy(p, &v, 8);
      break;
    }
    case DType::Bool:
      *p = small(rng) & 1;
      break;
    default: {
      int64_t v = small(rng);
      std::memcpy(p, &v, dtypeSize(t.type.dtype));
    }
    }
  }
}

double elementAsDouble(const HostTensor &t, size_t i) {
  const uint8_t *p = t.data.data() + i * dtypeSize(t.type.dtype);
  switch (t.type.dtype) {
  case DType::F32: {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
  case DType::F64: {
    double v;
    std::memcpy(&v, p, 8);
    return v;
  }
  case DType::I64: {
    int64_t v;
    std::memcpy(&v, p, 8);
    return double(v);
  }
  case DType::I32: {
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  case DType::I16: {
    int16_t v;
    std::memcpy(&v, p, 2);
    return v;
  }
  case DType::I8:
    return double(*reinterpret_cast<const int8_t *>(p));
  case DType::U8:
  case DType::Bool:
    return *p;
  case DType::U16: {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
  }
  case DType::U32: {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  case DType::U64: {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return double(v);
  }
  case DType::F16: {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return halfToFloat(v);
  }
  case DType::BF16: {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return bf16ToFloat(v);
  }
  case DType::Invalid:
    break;
  }
  // Plans and tensor files are checked on load; no other type gets here.
  std::fprintf(stderr, "partc-run: internal error: element type %s\n",
               dtypeName(t.type.dtype));
  std::abort();
}

void printTensor(const HostTensor &t) {
  size_t n = t.type.numElements();
  double sum = 0;
  for (size_t i = 0; i < n; ++i)
    sum += elementAsDouble(t, i);
  std::printf("output '%s' %s sum=%.6g values:", t.name.c_str(),
              t.type.str().c_str(), sum);
  for (size_t i = 0; i < std::min<size_t>(n, 6); ++i)
    std::printf(" %.6g", elementAsDouble(t, i));
  std::printf("%s\n", n > 6 ? " ..." : "");
}

/// Compares like numpy.testing.assert_allclose; NaNs must match NaNs.
bool compare(const HostTensor &got, const HostTensor &want, double rtol,
             double atol, std::string &report) {
  if (got.type != want.type) {
    report =
        "type " + got.type.str() + " differs from expected " + want.type.str();
    return false;
  }
  size_t n = got.type.numElements(), bad = 0, worst = 0;
  double worstExcess = -1;
  for (size_t i = 0; i < n; ++i) {
    double g = elementAsDouble(got, i), w = elementAsDouble(want, i);
    if (std::isnan(g) && std::isnan(w))
      continue;
    if (std::isinf(g) && std::isinf(w) && (g > 0) == (w > 0))
      continue;
    double err = std::fabs(g - w), tol = atol + rtol * std::fabs(w);
    if (!(err <= tol)) {
      ++bad;
      double excess = std::isnan(err) ? 1e300 : err - tol;
      if (excess > worstExcess) {
        worstExcess = excess;
        worst = i;
      }
    }
  }
  if (!bad)
    return true;
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "%zu of %zu elements differ; worst at flat index %zu: got "
                "%.9g, expected %.9g",
                bad, n, worst, elementAsDouble(got, worst),
                elementAsDouble(want, worst));
  report = buf;
  return false;
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

int main(int argc, char **argv) {
  Options opts;
  Status s = parseArgs(argc, argv, opts);
  if (!s.ok()) {
    usage();
    return fail(s.message());
  }
  Plan plan;
  s = readPlanFile(opts.planPath, plan);
  if (!s.ok())
    return fail(s.message());
  if (opts.summary)
    std::printf("%s", summarizePlan(plan).c_str());

  // Inputs: explicit files, then the check directory, then random data.
  std::vector<HostTensor> inputs(plan.inputs.size());
  std::map<std::string, size_t> inputIndex;
  for (size_t i = 0; i < plan.inputs.size(); ++i)
    inputIndex[plan.inputs[i].name] = i;
  std::vector<bool> given(plan.inputs.size(), false);
  auto accept = [&](size_t i, HostTensor &&t, const std::string &file) {
    // ONNX's test data stores bfloat16 tensors as uint16 (numpy has no
    // bfloat16); the bits are the same.
    if (t.type.dtype == DType::U16 && plan.inputs[i].type.dtype == DType::BF16)
      t.type.dtype = DType::BF16;
    if (t.type != plan.inputs[i].type)
      return Status::error("input '" + plan.inputs[i].name + "' from '" + file +
                           "' is " + t.type.str() + " but the plan expects " +
                           plan.inputs[i].type.str());
    inputs[i] = std::move(t);
    given[i] = true;
    return Status();
  };
  for (auto &[name, file] : opts.inputs) {
    auto it = inputIndex.find(name);
    if (it == inputIndex.end())
      return fail("the plan has no input named '" + name + "'");
    HostTensor t;
    s = readTensorFile(file, t);
    if (!s.ok())
      return fail(s.message());
    s = accept(it->second, std::move(t), file);
    if (!s.ok())
      return fail(s.message());
  }
  if (!opts.checkDir.empty()) {
    std::vector<std::string> files = numberedFiles(opts.checkDir, "input");
    for (size_t k = 0; k < files.size(); ++k) {
      HostTensor t;
      s = readTensorFile(files[k], t);
      if (!s.ok())
        return fail(s.message());
      // Match by name where the file has one, else by position.
      size_t idx = k;
      if (!t.name.empty()) {
        // A named tensor the plan lacks was frozen at compile time.
        if (!inputIndex.count(t.name))
          continue;
        idx = inputIndex[t.name];
      }
      if (idx >= inputs.size())
        return fail("'" + files[k] + "' has no matching plan input");
      if (given[idx])
        continue;
      s = accept(idx, std::move(t), files[k]);
      if (!s.ok())
        return fail(s.message());
    }
  }
  std::mt19937_64 rng(opts.seed);
  for (size_t i = 0; i < inputs.size(); ++i) {
    inputs[i].name = plan.inputs[i].name;
    if (given[i])
      continue;
    inputs[i].type = plan.inputs[i].type;
    inputs[i].data.assign(inputs[i].type.byteSize(), 0);
    fillRandom(inputs[i], rng);
  }

  // One function per backend so the loop below does not care which runs.
  std::function<Status(const std::vector<TensorRef> &,
                       const std::vector<TensorRef> &)>
      runPlan;
  std::unique_ptr<CpuExecutor> cpuExec;
#ifdef PARTC_HAVE_CUDA
  std::unique_ptr<CudaExecutor> cudaExec;
  if (opts.backend == "cuda") {
    CudaOptions cudaOptions;
    cudaOptions.tf32 = opts.precision == "tf32";
    cudaOptions.graphs = opts.graphs;
    cudaOptions.fuseEpilogues = opts.fuseEpilogues;
    cudaOptions.cudnnGraph = opts.cudnnGraph;
    cudaOptions.cudnnKnobs = opts.cudnnKnobs;
    cudaOptions.generatedChains = opts.generatedChains;
    cudaOptions.directTransfers = opts.directTransfers;
    cudaOptions.hostStaging = opts.hostStaging;
    cudaOptions.devicesPerGpu = opts.devicesPerGpu;
    s = CudaExecutor::create(plan, cudaOptions, cudaExec);
    if (!s.ok())
      return fail(s.message());
    if (cudaExec->fallbackCount() && !opts.quiet)
      std::fprintf(stderr,
                   "partc-run: note: %zu kernel(s) run on the host because no "
                   "GPU kernel exists yet: %s\n",
                   cudaExec->fallbackCount(),
                   cudaExec->fallbackSummary().c_str());
    // Staging through host memory is much slower than NVLink: say so.
    if ((opts.summary || cudaExec->hostStagedCount()) && !opts.quiet &&
        !plan.channels.empty())
      std::fprintf(stderr, "partc-run: %s\n",
                   cudaExec->transferSummary().c_str());
    cuda::ChainStats chains = cuda::generatedChainStats();
    if (chains.failed && !opts.quiet)
      std::fprintf(stderr,
                   "partc-run: note: %d fused chain program(s) run "
                   "interpreted because NVRTC could not compile them: %s\n",
                   chains.failed, chains.firstFailure.c_str());
    if (chains.compiled && opts.summary && !opts.quiet)
      std::fprintf(stderr,
                   "partc-run: %d fused chain program(s) compiled at load "
                   "(NVRTC) in %.0f ms\n",
                   chains.compiled, chains.seconds * 1e3);
    if (!opts.profilePath.empty() && !cudaExec->variantSummary().empty())
      std::fprintf(stderr, "partc-run: kernels chosen by timing: %s\n",
                   cudaExec->variantSummary().c_str());
    bool first = true;
    runPlan = [&, first](const std::vector<TensorRef> &in,
                         const std::vector<TensorRef> &out) mutable {
      Status st = cudaExec->run(in, out, opts.keepInputs && !first);
      first = false;
      return st;
    };
  }
#endif
  if (!runPlan) {
    s = CpuExecutor::create(plan, cpuExec);
    if (!s.ok())
      return fail(s.message());
    // Memory no instruction wrote reads as NaN, so a missing transfer shows.
    cpuExec->poisonArenas(0xFF);
    runPlan = [&](const std::vector<TensorRef> &in,
                  const std::vector<TensorRef> &out) {
      return cpuExec->run(in, out);
    };
  }

  std::vector<HostTensor> outputs(plan.outputs.size());
  std::vector<TensorRef> inRefs, outRefs;
  for (auto &t : inputs)
    inRefs.push_back(t.ref());
  for (size_t i = 0; i < outputs.size(); ++i) {
    outputs[i].name = plan.outputs[i].name;
    outputs[i].type = plan.outputs[i].type;
    outputs[i].data.assign(outputs[i].type.byteSize(), 0);
    outRefs.push_back(outputs[i].ref());
  }
#ifdef PARTC_HAVE_CUDA
  if (cudaExec) {
    for (auto &t : inputs)
      if (Status r = cudaExec->registerHostMemory(t.data.data(), t.data.size());
          !r.ok())
        return fail(r.message());
    for (auto &t : outputs)
      if (Status r = cudaExec->registerHostMemory(t.data.data(), t.data.size());
          !r.ok())
        return fail(r.message());
  }
#endif
  if (opts.stream && opts.backend != "cuda")
    return fail("--stream needs --backend cuda (the CPU reference runs one "
                "batch at a time)");
  if (opts.stream && !opts.profilePath.empty())
    return fail("--stream cannot be combined with --profile (profile one "
                "batch at a time; --trace shows a streamed run)");
  std::vector<double> times;
  std::function<double(size_t, size_t)> kernelSeconds;
  std::function<const char *(size_t, size_t)> kernelVariant;
  for (int it = 0; it < opts.warmup + opts.iterations; ++it) {
    if (it == opts.warmup && !opts.profilePath.empty()) {
      // Profile only the timed runs.
#ifdef PARTC_HAVE_CUDA
      if (cudaExec) {
        if (Status ps = cudaExec->enableProfiling(); !ps.ok())
          return fail(ps.message());
        kernelSeconds = [&](size_t d, size_t i) {
          return cudaExec->kernelSeconds(d, i);
        };
        kernelVariant = [&](size_t d, size_t i) {
          return cudaExec->kernelVariant(d, i);
        };
        if (!opts.quiet)
          std::fprintf(stderr,
                       "partc-run: profile: an event pair around an empty "
                       "kernel takes %.1f us on GPU 0; subtracted from each "
                       "kernel\n",
                       cudaExec->eventOverheadSeconds(0) * 1e6);
      }
#endif
      if (cpuExec) {
        cpuExec->enableProfiling();
        kernelSeconds = [&](size_t d, size_t i) {
          return cpuExec->kernelSeconds(d, i);
        };
      }
    }
    bool last = it + 1 == opts.warmup + opts.iterations;
    if (last && !opts.tracePath.empty() && !opts.stream) {
#ifdef PARTC_HAVE_CUDA
      if (cudaExec)
        if (Status ts = cudaExec->enableTracing(); !ts.ok())
          return fail(ts.message());
#endif
      if (cpuExec)
        cpuExec->enableTracing();
    }
    auto t0 = std::chrono::steady_clock::now();
    s = runPlan(inRefs, outRefs);
    if (!s.ok())
      return fail(s.message());
    auto t1 = std::chrono::steady_clock::now();
    if (it >= opts.warmup)
      times.push_back(
          std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
#ifdef PARTC_HAVE_CUDA
  if (cudaExec && !cudaExec->graphFailure().empty() && !opts.quiet)
    std::fprintf(stderr,
                 "partc-run: note: CUDA graph capture failed (%s); "
                 "kernels were launched directly\n",
                 cudaExec->graphFailure().c_str());
#endif
  if (opts.iterations > 1 || opts.warmup > 0) {
    std::sort(times.begin(), times.end());
    std::printf("latency ms: p50 %.3f p90 %.3f min %.3f (%zu iterations)\n",
                times[times.size() / 2], times[times.size() * 9 / 10],
                times.front(), times.size());
  }
#ifdef PARTC_HAVE_CUDA
  if (opts.stream && cudaExec) {
    // Once to build the per-segment graphs, then timed.
    size_t n = static_cast<size_t>(opts.iterations);
    s = cudaExec->runStream(inRefs, outRefs, std::min<size_t>(n, 4),
                            opts.keepInputs);
    if (!s.ok())
      return fail(s.message());
    auto t0 = std::chrono::steady_clock::now();
    s = cudaExec->runStream(inRefs, outRefs, n, opts.keepInputs);
    if (!s.ok())
      return fail(s.message());
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
                  std::atof(period->second.c_str()),
                  ms / static_cast<double>(n));
    if (!opts.tracePath.empty()) {
      // A separate run, so that the timing events do not touch the figure
      // above.
      cudaExec->enableStreamTracing();
      s = cudaExec->runStream(inRefs, outRefs, n, opts.keepInputs);
      if (!s.ok())
        return fail(s.message());
    }
  }
#endif

  if (!opts.tracePath.empty()) {
    std::vector<TraceEvent> events;
#ifdef PARTC_HAVE_CUDA
    if (cudaExec)
      events = cudaExec->lastRunTrace();
#endif
    if (cpuExec)
      events = cpuExec->lastRunTrace();
    s = writeTrace(opts.tracePath, plan, opts.backend, events);
    if (!s.ok())
      return fail(s.message());
  }
  if (!opts.profilePath.empty()) {
    s = writeProfile(opts.profilePath, plan, opts.backend, kernelSeconds,
                     kernelVariant);
    if (!s.ok())
      return fail(s.message());
    printStageComparison(plan, kernelSeconds);
  }
  auto predicted = plan.metadata.find("predicted_step_ms");
  if ((opts.iterations > 1 || opts.warmup > 0) &&
      predicted != plan.metadata.end()) {
    std::vector<double> sorted = times;
    std::sort(sorted.begin(), sorted.end());
    std::printf("predicted step %.3f ms, measured p50 %.3f ms\n",
                std::atof(predicted->second.c_str()),
                sorted[sorted.size() / 2]);
  }
  if (!opts.quiet)
    for (const HostTensor &t : outputs)
      printTensor(t);
  if (!opts.outputDir.empty()) {
    // Inputs are written beside the outputs so that the directory is a
    // complete test_data_set for --check.
    mkdir(opts.outputDir.c_str(), 0755);
    for (size_t i = 0; i < inputs.size(); ++i) {
      s = writeTensorFile(
          opts.outputDir + "/input_" + std::to_string(i) + ".pb", inputs[i]);
      if (!s.ok())
        return fail(s.message());
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      s = writeTensorFile(
          opts.outputDir + "/output_" + std::to_string(i) + ".pb", outputs[i]);
      if (!s.ok())
        return fail(s.message());
    }
  }
  if (!opts.checkDir.empty()) {
    std::vector<std::string> files = numberedFiles(opts.checkDir, "output");
    if (files.size() != outputs.size())
      return fail("'" + opts.checkDir + "' has " +
                  std::to_string(files.size()) + " outputs, the plan has " +
                  std::to_string(outputs.size()));
    bool allOk = true;
    for (size_t k = 0; k < files.size(); ++k) {
      HostTensor want;
      s = readTensorFile(files[k], want);
      if (!s.ok())
        return fail(s.message());
      if (want.type.dtype == DType::U16 && outputs[k].type.dtype == DType::BF16)
        want.type.dtype = DType::BF16;
      std::string report;
      if (!compare(outputs[k], want, opts.rtol, opts.atol, report)) {
        std::fprintf(stderr, "partc-run: mismatch in output '%s': %s\n",
                     outputs[k].name.c_str(), report.c_str());
        allOk = false;
      }
    }
    if (!allOk)
      return 2;
    std::printf("check passed: %zu output(s) match %s\n", outputs.size(),
                opts.checkDir.c_str());
  }
  return 0;
}

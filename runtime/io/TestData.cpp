//===- TestData.cpp - A plan's inputs, and outputs against expected ones --===//
#include "runtime/io/TestData.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <map>
#include <random>
#include <sys/stat.h>

namespace partc::runtime {

namespace {

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

bool isDirectory(const std::string &path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

/// ONNX's test data stores bfloat16 tensors as uint16 (numpy has no
/// bfloat16); the bits are the same.
void adoptBf16(HostTensor &t, DType planType) {
  if (t.type.dtype == DType::U16 && planType == DType::BF16)
    t.type.dtype = DType::BF16;
}

} // namespace

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

std::string describeTensor(const HostTensor &t) {
  size_t n = t.type.numElements();
  double sum = 0;
  for (size_t i = 0; i < n; ++i)
    sum += elementAsDouble(t, i);
  char buf[64];
  std::snprintf(buf, sizeof(buf), " sum=%.6g values:", sum);
  std::string s = "output '" + t.name + "' " + t.type.str() + buf;
  for (size_t i = 0; i < std::min<size_t>(n, 6); ++i) {
    std::snprintf(buf, sizeof(buf), " %.6g", elementAsDouble(t, i));
    s += buf;
  }
  return s + (n > 6 ? " ..." : "");
}

Status loadInputs(const Plan &plan,
                  const std::vector<std::pair<std::string, std::string>> &files,
                  const std::string &testDataDir, uint64_t seed,
                  std::vector<HostTensor> &inputs) {
  // Inputs and outputs live in host memory for the whole run: refuse, with
  // the numbers, a plan whose tensors this machine cannot hold.
  uint64_t hostTensors = 0;
  for (const auto *decls : {&plan.inputs, &plan.outputs})
    for (const TensorDecl &d : *decls)
      hostTensors += d.type.byteSize(); // each at most 2^50 (verifyPlan)
  uint64_t hostBytes = hostMemoryBytes();
  if (hostTensors > hostBytes)
    return Status::error("the plan's inputs and outputs need " +
                         std::to_string(hostTensors) +
                         " bytes but this machine has " +
                         std::to_string(hostBytes) + " bytes of memory");
  inputs.assign(plan.inputs.size(), HostTensor());
  std::map<std::string, size_t> inputIndex;
  for (size_t i = 0; i < plan.inputs.size(); ++i)
    inputIndex[plan.inputs[i].name] = i;
  std::vector<bool> given(plan.inputs.size(), false);
  auto accept = [&](size_t i, HostTensor &&t, const std::string &file) {
    adoptBf16(t, plan.inputs[i].type.dtype);
    if (t.type != plan.inputs[i].type)
      return Status::error("input '" + plan.inputs[i].name + "' from '" + file +
                           "' is " + t.type.str() + " but the plan expects " +
                           plan.inputs[i].type.str());
    inputs[i] = std::move(t);
    given[i] = true;
    return Status();
  };
  for (const auto &[name, file] : files) {
    auto it = inputIndex.find(name);
    if (it == inputIndex.end())
      return Status::error("the plan has no input named '" + name + "'");
    if (given[it->second])
      return Status::error("input '" + name +
                           "' is given twice; give each input once");
    HostTensor t;
    PARTC_RETURN_IF_ERROR(readTensorFile(
        file, t, tensorFileLimit(plan.inputs[it->second].type.byteSize())));
    PARTC_RETURN_IF_ERROR(accept(it->second, std::move(t), file));
  }
  if (!testDataDir.empty()) {
    if (!isDirectory(testDataDir))
      return Status::error("test data directory '" + testDataDir +
                           "' not found");
    std::vector<std::string> found = numberedFiles(testDataDir, "input");
    // Files are matched to inputs after reading (by the name inside), so
    // each may be as large as the largest input.
    uint64_t largest = 0;
    for (const TensorDecl &d : plan.inputs)
      largest = std::max<uint64_t>(largest, d.type.byteSize());
    for (size_t k = 0; k < found.size(); ++k) {
      HostTensor t;
      PARTC_RETURN_IF_ERROR(
          readTensorFile(found[k], t, tensorFileLimit(largest)));
      // Match by name where the file has one, else by position.
      size_t idx = k;
      if (!t.name.empty()) {
        // A named tensor the plan lacks was frozen at compile time.
        if (!inputIndex.count(t.name))
          continue;
        idx = inputIndex[t.name];
      }
      if (idx >= inputs.size())
        return Status::error("'" + found[k] + "' has no matching plan input");
      if (given[idx])
        continue;
      PARTC_RETURN_IF_ERROR(accept(idx, std::move(t), found[k]));
    }
  }
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < inputs.size(); ++i) {
    inputs[i].name = plan.inputs[i].name;
    if (given[i])
      continue;
    inputs[i].type = plan.inputs[i].type;
    inputs[i].data.assign(inputs[i].type.byteSize(), 0);
    fillRandom(inputs[i], rng);
  }
  return Status();
}

std::vector<HostTensor> allocateOutputs(const Plan &plan) {
  std::vector<HostTensor> outputs(plan.outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    outputs[i].name = plan.outputs[i].name;
    outputs[i].type = plan.outputs[i].type;
    outputs[i].data.assign(outputs[i].type.byteSize(), 0);
  }
  return outputs;
}

Status compareWithTestData(const std::string &dir,
                           const std::vector<HostTensor> &outputs, double rtol,
                           double atol, std::vector<std::string> &mismatches) {
  if (!isDirectory(dir))
    return Status::error("test data directory '" + dir + "' not found");
  std::vector<std::string> files = numberedFiles(dir, "output");
  if (files.size() != outputs.size())
    return Status::error("'" + dir + "' has " + std::to_string(files.size()) +
                         " outputs, the plan has " +
                         std::to_string(outputs.size()));
  for (size_t k = 0; k < files.size(); ++k) {
    HostTensor want;
    // Expected bf16 outputs may be stored as f32: twice the bytes.
    PARTC_RETURN_IF_ERROR(readTensorFile(
        files[k], want, tensorFileLimit(2 * outputs[k].type.byteSize())));
    adoptBf16(want, outputs[k].type.dtype);
    std::string report;
    if (!compare(outputs[k], want, rtol, atol, report))
      mismatches.push_back("mismatch in output '" + outputs[k].name +
                           "': " + report);
  }
  return Status();
}

Status writeTestData(const std::string &dir,
                     const std::vector<HostTensor> &inputs,
                     const std::vector<HostTensor> &outputs) {
  // Inputs go beside the outputs so that the directory is a complete
  // test_data_set for --check.
  mkdir(dir.c_str(), 0755);
  for (size_t i = 0; i < inputs.size(); ++i)
    PARTC_RETURN_IF_ERROR(writeTensorFile(
        dir + "/input_" + std::to_string(i) + ".pb", inputs[i]));
  for (size_t i = 0; i < outputs.size(); ++i)
    PARTC_RETURN_IF_ERROR(writeTensorFile(
        dir + "/output_" + std::to_string(i) + ".pb", outputs[i]));
  return Status();
}

} // namespace partc::runtime

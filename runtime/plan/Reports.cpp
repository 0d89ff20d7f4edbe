//===- Reports.cpp - Traces and kernel profiles of plan runs --------------===//
#include "runtime/kernels/Kernel.h"
#include "runtime/plan/Plan.h"

#include <cstdio>

namespace partc::runtime {

namespace {

/// `s` as a quoted JSON string.
std::string jsonString(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + "\"";
}

} // namespace

Status writeTrace(const std::string &path, const Plan &plan,
                  const std::string &backend,
                  const std::vector<TraceEvent> &events) {
  FILE *f = std::fopen(path.c_str(), "w");
  if (!f)
    return Status::error("cannot write trace '" + path + "'");
  std::fprintf(f, "{\"traceEvents\": [\n");
  bool first = true;
  auto sep = [&]() {
    std::fprintf(f, "%s", first ? "" : ",\n");
    first = false;
  };
  for (size_t d = 0; d < plan.devices.size(); ++d) {
    sep();
    std::fprintf(f,
                 "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %zu, "
                 "\"args\": {\"name\": \"%s device %zu\"}}",
                 d, backend.c_str(), d);
  }
  for (const TraceEvent &e : events) {
    const Instruction &in = plan.devices[e.device].instructions[e.index];
    std::string name = e.name;
    if (name.empty()) {
      name =
          in.op == OpCode::Kernel ? in.kernel : std::string(opCodeName(in.op));
      if (in.op == OpCode::Send || in.op == OpCode::Recv ||
          in.op == OpCode::WaitConsumed)
        name += " #" + std::to_string(in.index);
    }
    std::string cat = e.category;
    if (cat.empty())
      cat = in.op == OpCode::Kernel ? "kernel"
            : in.op == OpCode::LoadInput || in.op == OpCode::StoreOutput ? "io"
            : in.op == OpCode::WaitConsumed ? "wait"
                                            : "transfer";
    sep();
    std::fprintf(f,
                 "{\"name\": %s, \"cat\": \"%s\", \"ph\": \"X\", "
                 "\"pid\": %zu, \"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, "
                 "\"args\": {\"node\": %s, \"micro_batch\": %d, \"batch\": "
                 "%lld}}",
                 jsonString(name).c_str(), cat.c_str(), e.device, e.track,
                 e.startUs, e.durationUs, jsonString(in.location).c_str(),
                 in.microBatch, static_cast<long long>(e.batch));
  }
  std::fprintf(f, "\n]}\n");
  std::fclose(f);
  return Status();
}

/// A cost table: mean seconds of every kernel instruction, with the
/// signature partc compile --cost-table matches on.
Status
writeProfile(const std::string &path, const Plan &plan,
             const std::string &backend,
             const std::function<double(size_t, size_t)> &seconds,
             const std::function<const char *(size_t, size_t)> &variant) {
  if (!seconds)
    return Status::error("--profile needs at least one timed iteration");
  FILE *f = std::fopen(path.c_str(), "w");
  if (!f)
    return Status::error("cannot write profile '" + path + "'");
  std::fprintf(f, "{\n  \"backend\": %s,\n  \"kernels\": [",
               jsonString(backend).c_str());
  bool first = true;
  for (size_t d = 0; d < plan.devices.size(); ++d)
    for (size_t i = 0; i < plan.devices[d].instructions.size(); ++i) {
      const Instruction &in = plan.devices[d].instructions[i];
      if (in.op != OpCode::Kernel)
        continue;
      std::vector<TensorType> ins, outs;
      instructionTypes(in, ins, outs);
      const char *chosen = variant ? variant(d, i) : nullptr;
      std::string variantField =
          chosen ? " \"variant\": " + jsonString(chosen) + "," : "";
      std::fprintf(
          f,
          "%s\n    {\"device\": %zu, \"node\": %s, \"seconds\": "
          "%.9g,%s\n     \"signature\": %s}",
          first ? "" : ",", d, jsonString(in.location).c_str(), seconds(d, i),
          variantField.c_str(),
          jsonString(kernelSignature(in.kernel, in.attrs, ins, outs)).c_str());
      first = false;
    }
  std::fprintf(f, "\n  ]\n}\n");
  std::fclose(f);
  return Status();
}

} // namespace partc::runtime

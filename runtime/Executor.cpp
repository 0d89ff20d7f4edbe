//===- Executor.cpp - What every backend shares ---------------------------===//
#include "runtime/Executor.h"

#include <cstring>

namespace partc::runtime {

Executor::~Executor() = default;

void initialStateBytes(const Plan &plan, size_t index, void *data) {
  const StateDecl &decl = plan.states[index];
  size_t bytes = decl.type.byteSize();
  if (!bytes)
    return;
  if (decl.zeroInit)
    std::memset(data, 0, bytes);
  else
    std::memcpy(data, plan.weightData + decl.initOffset, bytes);
}

Status Executor::runStream(const std::vector<TensorRef> &,
                           const std::vector<TensorRef> &, size_t, bool, bool) {
  return Status::error("this backend runs one batch at a time; streaming "
                       "batches needs --backend cuda");
}

Status checkFaultInjection(const FailureOptions &failure, size_t devices) {
  const FaultInjection &fault = failure.fault;
  if (fault.kind == FaultInjection::Kind::None)
    return Status();
  if (fault.device >= devices)
    return Status::error("--inject-fault names device " +
                         std::to_string(fault.device) + " but the plan has " +
                         std::to_string(devices) + " device(s)");
  if (fault.kind == FaultInjection::Kind::Hang &&
      failure.stepTimeoutSeconds <= 0)
    return Status::error("an injected hang ends only at the step timeout; "
                         "give --step-timeout SECONDS");
  return Status();
}

} // namespace partc::runtime

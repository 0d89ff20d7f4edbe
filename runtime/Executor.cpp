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

} // namespace partc::runtime

//===- Executor.cpp - What every backend shares ---------------------------===//
#include "runtime/Executor.h"

namespace partc::runtime {

Executor::~Executor() = default;

Status Executor::runStream(const std::vector<TensorRef> &,
                           const std::vector<TensorRef> &, size_t, bool) {
  return Status::error("this backend runs one batch at a time; streaming "
                       "batches needs --backend cuda");
}

} // namespace partc::runtime

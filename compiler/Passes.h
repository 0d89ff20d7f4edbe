//===- Passes.h - partc compiler passes -------------------------*- C++ -*-===//
#ifndef PARTC_COMPILER_PASSES_H
#define PARTC_COMPILER_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>
#include <string>

namespace mlir::partc {

#define GEN_PASS_DECL
#include "compiler/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "compiler/Passes.h.inc"

} // namespace mlir::partc

#endif // PARTC_COMPILER_PASSES_H

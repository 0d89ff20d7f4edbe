//===- PlanExport.h - plan dialect to plan file -----------------*- C++ -*-===//
#ifndef PARTC_COMPILER_TARGET_PLANEXPORT_H
#define PARTC_COMPILER_TARGET_PLANEXPORT_H

#include "mlir/IR/BuiltinOps.h"
#include "runtime/plan/Plan.h"

#include <vector>

namespace mlir::partc {

/// Translates the module's plan.program into the runtime's Plan. The
/// weights are copied into `weightStorage`, which `plan` points into.
LogicalResult exportPlan(ModuleOp module, ::partc::runtime::Plan &plan,
                         std::vector<uint8_t> &weightStorage);

} // namespace mlir::partc

#endif // PARTC_COMPILER_TARGET_PLANEXPORT_H

//===- PlanDialect.h - partc plan dialect -----------------------*- C++ -*-===//
#ifndef PARTC_DIALECTS_PLAN_PLANDIALECT_H
#define PARTC_DIALECTS_PLAN_PLANDIALECT_H

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"

#include "dialects/Plan/PlanDialect.h.inc"

namespace mlir::partc::plan {
/// Every buffer a kernel is given starts at a multiple of this many bytes:
/// arena offsets and a view's offset into its source.
constexpr int64_t kBufferAlignment = 64;
} // namespace mlir::partc::plan

#define GET_OP_CLASSES
#include "dialects/Plan/PlanOps.h.inc"

#endif // PARTC_DIALECTS_PLAN_PLANDIALECT_H

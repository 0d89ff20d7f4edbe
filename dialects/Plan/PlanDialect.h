//===- PlanDialect.h - partc plan dialect -----------------------*- C++ -*-===//
#ifndef PARTC_DIALECTS_PLAN_PLANDIALECT_H
#define PARTC_DIALECTS_PLAN_PLANDIALECT_H

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"

#include "dialects/Plan/PlanDialect.h.inc"

#define GET_OP_CLASSES
#include "dialects/Plan/PlanOps.h.inc"

#endif // PARTC_DIALECTS_PLAN_PLANDIALECT_H

//===- partc-opt.cpp - partc pass driver for lit tests --------------------===//
#include "compiler/Pipeline/CompilePipeline.h"
#include "compiler/Passes.h"
#include "dialects/Graph/GraphOps.h"
#include "dialects/Plan/PlanDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry
      .insert<mlir::partc::graph::GraphDialect, mlir::partc::plan::PlanDialect,
              mlir::func::FuncDialect, mlir::memref::MemRefDialect>();
  mlir::partc::registerPartcPasses();
  mlir::partc::registerCompilePipeline();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "partc pass driver\n", registry));
}

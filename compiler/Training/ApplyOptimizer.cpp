//===- ApplyOptimizer.cpp - partc-apply-optimizer -------------------------===//
//
// Turns the gradients partc-differentiate returns into in-place updates:
// parameters become graph.variables, the optimizer's state new ones, and
// one update op per parameter runs at the end of the step.
//
//===----------------------------------------------------------------------===//
#include "compiler/Passes.h"
#include "compiler/Utils/PassUtils.h"

#include "dialects/Graph/GraphOps.h"

#include "llvm/ADT/StringMap.h"

#include <cmath>
#include <cstdio>

namespace mlir::partc {
#define GEN_PASS_DEF_APPLYOPTIMIZER
#include "compiler/Passes.h.inc"

namespace {

std::string str(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return std::string(buf);
}

struct OptimizerOptions {
  std::string kind;
  double lr, momentum, weightDecay, beta1, beta2, eps;
};

class OptimizerBuilder {
public:
  OptimizerBuilder(func::FuncOp func, const OptimizerOptions &o)
      : func_(func), builder_(func.getContext()), o_(o) {}

  LogicalResult run();

private:
  LogicalResult checkOptions();
  Value variable(Location loc, StringRef name, StringRef role, Type type,
                 ElementsAttr value = {});
  void update(Value param, Value grad, StringRef name);

  func::FuncOp func_;
  OpBuilder builder_;
  OptimizerOptions o_;
  Value step_;
};

LogicalResult OptimizerBuilder::checkOptions() {
  auto bad = [&](const std::string &what) {
    return func_.emitError() << what, failure();
  };

  if (o_.kind != "sgd" && o_.kind != "adamw")
    return bad("unknown optimizer '" + o_.kind + "'; expected sgd or adamw");
  if (!(o_.lr > 0) || !std::isfinite(o_.lr))
    return bad("--lr must be a positive number, got " + str(o_.lr));
  if (!(o_.momentum >= 0) || o_.momentum >= 1)
    return bad("--momentum must be in [0, 1), got " + str(o_.momentum));
  if (o_.momentum != 0 && o_.kind != "sgd")
    return bad("--momentum applies to sgd; adamw has --betas");
  if (!(o_.beta1 >= 0 && o_.beta1 < 1 && o_.beta2 >= 0 && o_.beta2 < 1))
    return bad("--betas must each be in [0, 1), got " + str(o_.beta1) + "," +
               str(o_.beta2));
  if (!(o_.eps > 0))
    return bad("--eps must be positive, got " + str(o_.eps));
  // PyTorch's defaults: SGD 0, AdamW 0.01.
  if (o_.weightDecay < 0)
    o_.weightDecay = o_.kind == "adamw" ? 0.01 : 0.0;
  if (!std::isfinite(o_.weightDecay))
    return bad("--weight-decay must be finite");
  return success();
}

Value OptimizerBuilder::variable(Location loc, StringRef name, StringRef role,
                                 Type type, ElementsAttr value) {
  return graph::VariableOp::create(builder_, loc, type,
                                   builder_.getStringAttr(name),
                                   builder_.getStringAttr(role), value);
}

void OptimizerBuilder::update(Value param, Value grad, StringRef name) {
  Location loc = param.getLoc();
  Type type = param.getType();
  Block &body = func_.getBody().front();
  OpBuilder::InsertionGuard guard(builder_);
  auto f64 = [&](double v) { return builder_.getF64FloatAttr(v); };
  if (o_.kind == "sgd") {
    Value buffer;
    if (o_.momentum != 0) {
      builder_.setInsertionPointToStart(&body);
      buffer = variable(loc, (name + ".momentum").str(), "momentum", type);
    }
    builder_.setInsertionPoint(body.getTerminator());
    graph::SgdUpdateOp::create(builder_, loc, param, grad, buffer, f64(o_.lr),
                               f64(o_.momentum), f64(o_.weightDecay));
    return;
  }
  builder_.setInsertionPointToStart(&body);
  if (!step_)
    step_ = variable(loc, "optimizer.step", "step",
                     RankedTensorType::get({}, builder_.getI64Type()));
  Value m = variable(loc, (name + ".adam_m").str(), "adam_m", type);
  Value v = variable(loc, (name + ".adam_v").str(), "adam_v", type);
  builder_.setInsertionPoint(body.getTerminator());
  graph::AdamWUpdateOp::create(builder_, loc, param, grad, m, v, step_,
                               f64(o_.lr), f64(o_.beta1), f64(o_.beta2),
                               f64(o_.eps), f64(o_.weightDecay));
}

LogicalResult OptimizerBuilder::run() {
  if (failed(checkOptions()))
    return failure();
  Block &body = func_.getBody().front();
  llvm::StringMap<graph::ConstantOp> initializers;
  for (auto c : body.getOps<graph::ConstantOp>())
    if (auto name = c->getAttrOfType<StringAttr>(
            graph::GraphDialect::kInitializerAttrName))
      initializers[name.getValue()] = c;

  // partc-prepare-training made the step counter where dropout reads it.
  graph::CountStepOp counted;
  for (auto variable : body.getOps<graph::VariableOp>())
    if (variable.getRole() == "step")
      step_ = variable;
  if (step_)
    for (Operation *user : step_.getUsers())
      if (auto count = dyn_cast<graph::CountStepOp>(user))
        counted = count;

  auto ret = cast<func::ReturnOp>(body.getTerminator());
  SmallVector<unsigned> gradientResults;
  for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
    auto of = func_.getResultAttrOfType<StringAttr>(
        i, graph::GraphDialect::kGradientOfAttrName);
    if (!of)
      continue;
    graph::ConstantOp constant = initializers.lookup(of.getValue());
    if (!constant)
      return func_.emitError()
                 << "result " << i << " is the gradient of '" << of.getValue()
                 << "', which is not an initializer",
             failure();
    gradientResults.push_back(i);
    builder_.setInsertionPoint(constant);
    Value param = variable(constant.getLoc(), of.getValue(), "parameter",
                           constant.getType(), constant.getValue());
    constant.getResult().replaceAllUsesWith(param);
    update(param, ret.getOperand(i), of.getValue());
    constant.erase();
  }
  if (gradientResults.empty())
    return func_.emitError() << "@main returns no gradients; run "
                                "partc-differentiate first",
           failure();
  // Counted after every update that reads the step.
  if (counted) {
    counted->moveBefore(ret);
  } else if (step_) {
    builder_.setInsertionPoint(ret);
    graph::CountStepOp::create(builder_, ret.getLoc(), step_);
  }
  // The gradients are consumed in the plan; only the loss remains.
  llvm::BitVector erase(ret.getNumOperands());
  for (unsigned i : gradientResults)
    erase.set(i);
  ret->eraseOperands(erase);
  if (failed(func_.eraseResults(erase)))
    return failure();
  std::string summary = o_.kind + " lr=" + str(o_.lr);
  if (o_.kind == "sgd")
    summary += " momentum=" + str(o_.momentum);
  else
    summary +=
        " betas=" + str(o_.beta1) + "," + str(o_.beta2) + " eps=" + str(o_.eps);
  summary += " weight_decay=" + str(o_.weightDecay);
  recordPlacement(func_->getParentOfType<ModuleOp>(), "training_optimizer",
                  summary);
  // On a pipeline's stages: each update and its state with its gradient.
  placeUnplacedOps(func_);
  return success();
}

struct ApplyOptimizerPass
    : public impl::ApplyOptimizerBase<ApplyOptimizerPass> {
  using ApplyOptimizerBase::ApplyOptimizerBase;
  void runOnOperation() override {
    auto func = getMainFunction(getOperation());
    if (failed(func))
      return signalPassFailure();
    OptimizerOptions o{optimizer, lr, momentum, weightDecay, beta1, beta2, eps};
    if (failed(OptimizerBuilder(*func, o).run()))
      signalPassFailure();
  }
};

} // namespace
} // namespace mlir::partc

//===- PrepareTraining.cpp - partc-prepare-training -----------------------===//
//
// Training runs some ops differently from the exported graph. Batch
// normalization normalizes with the batch's statistics and keeps its
// running ones as state that moves toward them each step, so that the
// trained model (--save-state) evaluates as PyTorch's would. Dropout draws
// a new mask each step from the step counter and the run's seed.
//
//===----------------------------------------------------------------------===//
#include "compiler/Passes.h"
#include "compiler/Utils/PassUtils.h"

#include "dialects/Graph/GraphOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"

#include <cstdio>

namespace mlir::partc {
#define GEN_PASS_DEF_PREPARETRAINING
#include "compiler/Passes.h.inc"

namespace {

/// The initializer a running statistic comes from, or a diagnostic.
FailureOr<graph::ConstantOp> runningStatistic(graph::BatchNormOp bn,
                                              Value operand, StringRef what) {
  auto constant = operand.getDefiningOp<graph::ConstantOp>();
  if (!constant ||
      !constant->hasAttr(graph::GraphDialect::kInitializerAttrName))
    return bn.emitOpError()
               << "takes its running " << what
               << " from a computed value, not an initializer; only "
                  "initializers can be kept as running statistics in "
                  "training",
           failure();
  return constant;
}

/// Variables of the running statistics, by initializer: two norms that
/// share one (rare) share its state.
using StatisticVariables = llvm::DenseMap<Operation *, Value>;

LogicalResult prepareBatchNorm(graph::BatchNormOp bn, double chosenMomentum,
                               StatisticVariables &variables) {
  auto input = cast<RankedTensorType>(bn.getInput().getType());
  // --batch-norm-momentum where given, else the model's own (ONNX's
  // momentum is the running statistics' weight), else PyTorch's 0.1.
  double momentum = 0.1;
  if (chosenMomentum >= 0) {
    momentum = chosenMomentum;
  } else if (std::optional<APFloat> stated = bn.getMomentum()) {
    double weight = stated->convertToDouble();
    if (!(weight >= 0 && weight <= 1)) {
      char text[32];
      std::snprintf(text, sizeof text, "%g", weight);
      return bn.emitOpError()
                 << "has momentum " << text
                 << "; the running statistics' weight must be in [0, 1] "
                    "(hint: --batch-norm-momentum sets PyTorch's momentum "
                    "for every norm)",
             failure();
    }
    momentum = 1 - weight;
  }
  auto mean = runningStatistic(bn, bn.getMean(), "mean");
  auto variance = runningStatistic(bn, bn.getVariance(), "variance");
  if (failed(mean) || failed(variance))
    return failure();
  int64_t count = input.getNumElements() / input.getDimSize(1);
  if (count < 2)
    return bn.emitOpError()
               << "normalizes " << count << " value per channel of " << input
               << "; training-mode batch statistics need at least 2 (a "
                  "larger batch)",
           failure();
  for (Value v : {bn.getScale(), bn.getBias(), bn.getMean(), bn.getVariance()})
    if (cast<RankedTensorType>(v.getType()).getRank() != 1)
      return bn.emitOpError() << "has a per-channel operand of type "
                              << v.getType() << "; training needs them 1-D",
             failure();

  OpBuilder b(bn);
  Location loc = bn.getLoc();
  auto variable = [&](graph::ConstantOp c, StringRef role) -> Value {
    if (Value known = variables.lookup(c))
      return known;
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(c);
    auto name =
        c->getAttrOfType<StringAttr>(graph::GraphDialect::kInitializerAttrName);
    Value v = graph::VariableOp::create(b, c.getLoc(), c.getType(), name,
                                        b.getStringAttr(role), c.getValue());
    variables[c] = v;
    return v;
  };
  Value runningMean = variable(*mean, "running_mean");
  Value runningVar = variable(*variance, "running_var");
  auto train = graph::BatchNormTrainOp::create(
      b, loc, bn.getInput(), bn.getScale(), bn.getBias(), /*addend=*/Value(),
      bn.getEpsilonAttr(), /*channels_last=*/nullptr, /*activation=*/nullptr);
  bn.getResult().replaceAllUsesWith(train.getOutput());

  // After every read of the running statistics (there are none left in
  // the step, but the lowering orders updates last anyway).
  Block *body = bn->getBlock();
  b.setInsertionPoint(body->getTerminator());
  graph::UpdateRunningStatsOp::create(
      b, loc, runningMean, runningVar, train.getMean(), train.getVariance(),
      b.getF64FloatAttr(momentum), b.getI64IntegerAttr(count));
  bn.erase();
  return success();
}

/// An inference compile of a norm the model marks training_mode: the
/// batch's statistics, as ONNX defines it, and nothing kept.
void normalizeWithBatchStatistics(graph::BatchNormOp bn) {
  OpBuilder b(bn);
  auto train = graph::BatchNormTrainOp::create(
      b, bn.getLoc(), bn.getInput(), bn.getScale(), bn.getBias(),
      /*addend=*/Value(), bn.getEpsilonAttr(),
      /*channels_last=*/nullptr,
      /*activation=*/nullptr);
  bn.getResult().replaceAllUsesWith(train.getOutput());
  bn.erase();
}

/// Numbers the dropouts' streams and, in training, binds their step and
/// seed to state: the step counter, counted at the end of each step, and
/// the run's seed.
void prepareDropouts(func::FuncOp func, int64_t seed, bool training) {
  Block &body = func.getBody().front();
  SmallVector<graph::DropoutOp> dropouts(body.getOps<graph::DropoutOp>());
  if (dropouts.empty())
    return;
  auto b = OpBuilder::atBlockBegin(&body);
  Location loc = func.getLoc();
  Value step, seedVar;
  if (training) {
    auto scalar = RankedTensorType::get({}, b.getI64Type());
    step = graph::VariableOp::create(b, loc, scalar,
                                     b.getStringAttr("optimizer.step"),
                                     b.getStringAttr("step"), nullptr);
    auto seedValue = DenseElementsAttr::get(scalar, b.getI64IntegerAttr(seed));
    seedVar =
        graph::VariableOp::create(b, loc, scalar, b.getStringAttr("rng.seed"),
                                  b.getStringAttr("seed"), seedValue);
    b.setInsertionPoint(body.getTerminator());
    graph::CountStepOp::create(b, loc, step);
  }
  llvm::SetVector<Operation *> replaced;
  for (auto [index, dropout] : llvm::enumerate(dropouts)) {
    dropout.setStream(static_cast<int64_t>(index));
    if (!training)
      continue;
    for (Value old : {dropout.getStep(), dropout.getSeed()})
      if (Operation *def = old.getDefiningOp())
        replaced.insert(def);
    dropout.getStepMutable().assign(step);
    dropout.getSeedMutable().assign(seedVar);
  }
  for (Operation *def : replaced)
    if (def->use_empty())
      def->erase();
}

struct PrepareTrainingPass
    : public impl::PrepareTrainingBase<PrepareTrainingPass> {
  using PrepareTrainingBase::PrepareTrainingBase;
  void runOnOperation() override {
    auto func = getMainFunction(getOperation());
    if (failed(func))
      return signalPassFailure();
    // Negative: each norm's own momentum, from the model.
    if (!(batchNormMomentum < 0 ||
          (batchNormMomentum >= 0 && batchNormMomentum <= 1))) {
      char value[32];
      std::snprintf(value, sizeof value, "%g", double(batchNormMomentum));
      func->emitError() << "--batch-norm-momentum must be in [0, 1], got "
                        << value
                        << " (PyTorch's convention: the weight of the "
                           "batch's statistics)";
      return signalPassFailure();
    }
    SmallVector<graph::BatchNormOp> norms(
        func->getBody().front().getOps<graph::BatchNormOp>());
    prepareDropouts(*func, seed, !onlyMarked);
    if (onlyMarked) {
      for (graph::BatchNormOp bn : norms)
        if (bn.getTrainingMode())
          normalizeWithBatchStatistics(bn);
      return;
    }
    StatisticVariables variables;
    for (graph::BatchNormOp bn : norms)
      if (failed(prepareBatchNorm(bn, batchNormMomentum, variables)))
        return signalPassFailure();
    for (auto [op, variable] : variables)
      if (op->use_empty())
        op->erase();
    // A pipeline's stages are cut before training: new ops join theirs.
    placeUnplacedOps(*func);
    if (!norms.empty())
      recordPlacement(getOperation(), "training_batch_norms",
                      std::to_string(norms.size()) +
                          " with batch statistics, running ones as state");
  }
};

} // namespace
} // namespace mlir::partc

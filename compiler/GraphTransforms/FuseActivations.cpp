//===- FuseActivations.cpp - partc-fuse-activations -----------------------===//
#include "compiler/Passes.h"
#include "compiler/Utils/PassUtils.h"

#include "dialects/Graph/GraphOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

namespace mlir::partc {
#define GEN_PASS_DEF_FUSEACTIVATIONS
#include "compiler/Passes.h.inc"

namespace {
struct FuseActivationsPass
    : public impl::FuseActivationsBase<FuseActivationsPass> {
  using FuseActivationsBase::FuseActivationsBase;

  void runOnOperation() override {
    SmallVector<graph::ReluOp> relus;
    getOperation().walk([&](graph::ReluOp relu) { relus.push_back(relu); });
    for (graph::ReluOp relu : relus) {
      Operation *producer = relu.getInput().getDefiningOp();
      if (!producer || !isa<graph::ConvOp, graph::GemmOp, graph::MatMulOp,
                            graph::AddOp, graph::BatchNormTrainOp>(producer))
        continue;
      // The producer's other users must keep seeing the value before ReLU,
      // and the pair must run on one device.
      if (!producer->getResult(0).hasOneUse() ||
          producer->hasAttr("activation") ||
          graph::getDevice(producer) != graph::getDevice(relu) ||
          producer->getResult(0).getType() != relu.getType())
        continue;
      producer->setAttr("activation",
                        StringAttr::get(producer->getContext(), "relu"));
      // Keep the ReLU's node name visible in diagnostics of the fused op.
      producer->setLoc(FusedLoc::get(producer->getContext(),
                                     {producer->getLoc(), relu.getLoc()}));
      relu.getResult().replaceAllUsesWith(producer->getResult(0));
      relu.erase();
    }
    // Before the residuals: a scaled product's add joins its epilogue. The
    // biases first, so that the scale folds into a linear layer's bias too.
    if (scaleWeights) {
      SmallVector<graph::AddOp> biasAdds;
      getOperation().walk([&](graph::AddOp add) { biasAdds.push_back(add); });
      for (graph::AddOp add : biasAdds)
        fuseMatMulBias(add);
      SmallVector<graph::MulOp> muls;
      getOperation().walk([&](graph::MulOp mul) { muls.push_back(mul); });
      for (graph::MulOp mul : muls)
        foldColumnScale(mul);
    }
    SmallVector<graph::AddOp> adds;
    getOperation().walk([&](graph::AddOp add) { adds.push_back(add); });
    for (graph::AddOp add : adds)
      if (!fuseMatMulBias(add) && !fuseReshapedGemmResidual(add) &&
          !fuseLayerNormGradResidual(add))
        fuseResidual(add);
    // After the residuals: SiLU applies to the sum.
    SmallVector<graph::SigmoidOp> sigmoids;
    getOperation().walk(
        [&](graph::SigmoidOp sigmoid) { sigmoids.push_back(sigmoid); });
    for (graph::SigmoidOp sigmoid : sigmoids)
      fuseConvSilu(sigmoid);
    // After the biases: a linear layer's Gelu follows its bias.
    SmallVector<graph::GeluOp> gelus;
    getOperation().walk([&](graph::GeluOp gelu) { gelus.push_back(gelu); });
    for (graph::GeluOp gelu : gelus)
      fuseGeluTanh(gelu, erfGeluAsTanh);
    SmallVector<graph::ReluGradOp> reluGrads;
    getOperation().walk(
        [&](graph::ReluGradOp grad) { reluGrads.push_back(grad); });
    for (graph::ReluGradOp grad : reluGrads)
      fuseReluGradIntoNorm(grad);
    SmallVector<graph::WhereOp> wheres;
    getOperation().walk([&](graph::WhereOp where) { wheres.push_back(where); });
    for (graph::WhereOp where : wheres)
      fuseSoftmaxNanToZero(where);
    SmallVector<graph::SoftmaxOp> softmaxes;
    getOperation().walk(
        [&](graph::SoftmaxOp softmax) { softmaxes.push_back(softmax); });
    for (graph::SoftmaxOp softmax : softmaxes)
      fuseSoftmaxBias(softmax);
  }

  /// mul(matmul(x, w, b), s) -> matmul(x, w * s, b * s) for constants w (a
  /// matrix), b and s, where s holds one value per column: ConvNeXt's layer
  /// scale. The products fold at compile time, so the scale costs no pass
  /// over memory and the residual add after it can join the product's
  /// epilogue. In a training step the weights are variables, not
  /// constants, so the pattern never matches there.
  static bool foldColumnScale(graph::MulOp mul) {
    for (unsigned k = 0; k < 2; ++k) {
      auto matmul = mul->getOperand(k).getDefiningOp<graph::MatMulOp>();
      Value scale = mul->getOperand(1 - k);
      if (!matmul || !matmul->hasOneUse() || matmul.getActivation() ||
          matmul.getAddend() || mul.getType() != matmul.getType() ||
          graph::getDevice(matmul) != graph::getDevice(mul))
        continue;
      auto weights = matmul.getRhs().getDefiningOp<graph::ConstantOp>();
      Value bias = matmul.getBias();
      if (!weights || !scale.getDefiningOp<graph::ConstantOp>() ||
          (bias && !bias.getDefiningOp<graph::ConstantOp>()))
        continue;
      auto weightType = cast<RankedTensorType>(weights.getType());
      auto scaleType = cast<RankedTensorType>(scale.getType());
      if (weightType.getRank() != 2 ||
          weightType.getElementType() != scaleType.getElementType())
        continue;
      int64_t columns = weightType.getDimSize(1);
      ArrayRef<int64_t> shape = scaleType.getShape();
      if (shape.empty() || shape.back() != columns ||
          llvm::any_of(shape.drop_back(), [](int64_t d) { return d != 1; }))
        continue;
      OpBuilder builder(matmul);
      Location loc = mul.getLoc();
      // s as [1, columns] scales w's columns; as the bias's shape, b.
      // Whatever the fold leaves unused is erased.
      SmallVector<Value> made;
      auto scaled = [&](Value constant) -> Value {
        auto type = cast<RankedTensorType>(constant.getType());
        SmallVector<int64_t> row(type.getRank(), 1);
        row.back() = columns;
        made.push_back(builder.createOrFold<graph::ReshapeOp>(
            loc, RankedTensorType::get(row, type.getElementType()), scale,
            builder.getDenseI64ArrayAttr(row)));
        made.push_back(
            builder.createOrFold<graph::MulOp>(loc, constant, made.back()));
        Value product = made.back();
        return product.getDefiningOp<graph::ConstantOp>() &&
                       product.getType() == type
                   ? product
                   : Value();
      };
      Value newWeights = scaled(weights);
      Value newBias = bias ? scaled(bias) : Value();
      // A fold the evaluator declines (too large) leaves the mul as it is.
      bool folded = newWeights && (!bias || newBias);
      if (folded) {
        matmul.getRhsMutable().assign(newWeights);
        if (bias)
          matmul.getEpilogueMutable().assign(newBias);
        matmul->setLoc(FusedLoc::get(matmul->getContext(),
                                     {matmul->getLoc(), mul.getLoc()}));
        mul.getResult().replaceAllUsesWith(matmul.getResult());
        mul.erase();
        made.append({weights.getResult(), scale, bias});
      }
      for (Value v : llvm::reverse(made))
        if (Operation *op = v ? v.getDefiningOp() : nullptr;
            op && op->use_empty())
          op->erase();
      if (folded)
        return true;
    }
    return false;
  }

  /// gelu(p) {approximate = "tanh"} -> p {activation = "gelu_tanh"} for a
  /// graph.matmul or graph.gemm p whose only use it is, seen through a
  /// reshape (GPT-2's Conv1D: a Gemm between reshapes), on one device:
  /// cuBLASLt's GELU epilogue computes that form, so the Gelu costs no pass
  /// over memory of its own. An element-wise op commutes with a reshape.
  /// With `erfAsTanh`, the exact Gelu too.
  static void fuseGeluTanh(graph::GeluOp gelu, bool erfAsTanh) {
    if (gelu.getApproximate() != "tanh" && !erfAsTanh)
      return;
    Value input = gelu.getInput();
    Operation *reshape = input.getDefiningOp<graph::ReshapeOp>();
    if (reshape) {
      if (!input.hasOneUse() ||
          graph::getDevice(reshape) != graph::getDevice(gelu))
        return;
      input = reshape->getOperand(0);
    }
    Operation *producer = input.getDefiningOp();
    if (!producer || !isa<graph::MatMulOp, graph::GemmOp>(producer) ||
        !input.hasOneUse() || producer->hasAttr("activation") ||
        graph::getDevice(producer) != graph::getDevice(gelu))
      return;
    producer->setAttr("activation",
                      StringAttr::get(producer->getContext(), "gelu_tanh"));
    producer->setLoc(FusedLoc::get(producer->getContext(),
                                   {producer->getLoc(), gelu.getLoc()}));
    gelu.getResult().replaceAllUsesWith(gelu.getInput());
    gelu.erase();
  }

  /// mul(c, sigmoid(c)) -> c {activation = "silu"} for a graph.conv c
  /// used by nothing else, on one device (either operand order): SiLU as
  /// PyTorch exports it, after each of EfficientNet's convolutions, so that
  /// it costs no pass over the convolution's output of its own. In a
  /// training step the backward pass also reads c and the sigmoid, so the
  /// pattern never matches there.
  static void fuseConvSilu(graph::SigmoidOp sigmoid) {
    Value conv = sigmoid.getInput();
    auto producer = conv.getDefiningOp<graph::ConvOp>();
    if (!producer || producer.getActivation() || !sigmoid->hasOneUse() ||
        sigmoid.getType() != conv.getType())
      return;
    auto mul = dyn_cast<graph::MulOp>(*sigmoid->getUsers().begin());
    if (!mul || mul.getType() != conv.getType() ||
        !((mul.getLhs() == conv && mul.getRhs() == sigmoid.getResult()) ||
          (mul.getRhs() == conv && mul.getLhs() == sigmoid.getResult())))
      return;
    // The convolution's only users are the sigmoid and the product.
    for (Operation *user : conv.getUsers())
      if (user != sigmoid.getOperation() && user != mul.getOperation())
        return;
    auto device = graph::getDevice(producer);
    if (graph::getDevice(sigmoid) != device || graph::getDevice(mul) != device)
      return;
    producer->setAttr("activation",
                      StringAttr::get(producer->getContext(), "silu"));
    producer->setLoc(
        FusedLoc::get(producer->getContext(),
                      {producer->getLoc(), sigmoid.getLoc(), mul.getLoc()}));
    mul.getResult().replaceAllUsesWith(conv);
    mul.erase();
    sigmoid.erase();
  }

  /// softmax(x + m) -> softmax(x, bias = m) for an add whose only use is
  /// the softmax and whose result has x's type: an attention mask (causal
  /// or padding) added to the scores costs a pass over the attention
  /// matrix, and the softmax reads the small mask as it goes.
  static void fuseSoftmaxBias(graph::SoftmaxOp softmax) {
    auto add = softmax.getInput().getDefiningOp<graph::AddOp>();
    if (!add || softmax.getBias() || !add->hasOneUse() ||
        add->hasAttr("activation") ||
        graph::getDevice(add) != graph::getDevice(softmax))
      return;
    Value x = add.getLhs(), bias = add.getRhs();
    if (x.getType() != add.getType())
      std::swap(x, bias);
    if (x.getType() != add.getType())
      return;
    softmax->setOperands({x, bias});
    softmax->setLoc(
        FusedLoc::get(softmax->getContext(), {add.getLoc(), softmax.getLoc()}));
    add.erase();
  }

  /// where(is_nan(s), 0, s) -> s with nan_to_zero, for s = softmax(x) used
  /// by nothing else: PyTorch's exported scaled_dot_product_attention zeroes
  /// fully masked rows so, at two passes over the attention matrix.
  static void fuseSoftmaxNanToZero(graph::WhereOp where) {
    auto softmax = where.getY().getDefiningOp<graph::SoftmaxOp>();
    auto isNan = where.getCondition().getDefiningOp<graph::IsNanOp>();
    if (!softmax || !isNan || isNan.getInput() != softmax.getResult() ||
        !isUniformFloatConstant(where.getX(), 0.0) ||
        where.getType() != softmax.getType() || !isNan->hasOneUse() ||
        graph::getDevice(softmax) != graph::getDevice(where) ||
        llvm::any_of(softmax->getUsers(), [&](Operation *user) {
          return user != where.getOperation() && user != isNan.getOperation();
        }))
      return;
    softmax.setNanToZero(true);
    softmax->setLoc(
        FusedLoc::get(softmax->getContext(),
                      {softmax.getLoc(), isNan.getLoc(), where.getLoc()}));
    where.getResult().replaceAllUsesWith(softmax.getResult());
    where.erase();
    isNan.erase();
  }

  /// batch_norm_grad(relu_grad(dy, y), x, ...) -> batch_norm_grad(dy, x,
  /// ..., bias) {activation = "relu"} where y is the same norm's output
  /// with ReLU fused (no addend): the gradient op computes y's sign again
  /// from x as it reads it, which saves ReLU's gradient a pass that reads
  /// two tensors and writes one.
  static void fuseReluGradIntoNorm(graph::ReluGradOp reluGrad) {
    auto norm = reluGrad.getRhs().getDefiningOp<graph::BatchNormTrainOp>();
    if (!norm || norm.getOutput() != reluGrad.getRhs() || norm.getAddend() ||
        norm.getActivation() != std::optional<StringRef>("relu") ||
        !reluGrad->hasOneUse())
      return;
    auto grad = dyn_cast<graph::BatchNormGradOp>(*reluGrad->user_begin());
    if (!grad || grad.getGrad() != reluGrad.getResult() || grad.getBias() ||
        grad.getActivation() || grad.getInput() != norm.getInput() ||
        grad.getScale() != norm.getScale() ||
        grad.getMean() != norm.getMean() ||
        grad.getVariance() != norm.getVariance() ||
        grad.getEpsilon() != norm.getEpsilon() ||
        grad.getChannelsLast() != norm.getChannelsLast() ||
        graph::getDevice(grad) != graph::getDevice(reluGrad) ||
        graph::getDevice(grad) != graph::getDevice(norm))
      return;
    grad.getGradMutable().assign(reluGrad.getLhs());
    grad.getBiasMutable().assign(norm.getBias());
    grad.setActivationAttr(StringAttr::get(grad->getContext(), "relu"));
    grad->setLoc(
        FusedLoc::get(grad->getContext(), {grad.getLoc(), reluGrad.getLoc()}));
    reluGrad.erase();
  }

  /// Operand k of `add` if an Op produced it that can take the add into
  /// its epilogue: the add is its only use, on the same device, of the same
  /// type, and it has no activation yet.
  template <typename Op>
  static Op absorbableProducer(graph::AddOp add, unsigned k) {
    auto producer = add->getOperand(k).getDefiningOp<Op>();
    if (!producer || !producer->getResult(0).hasOneUse() ||
        producer.getActivation() ||
        add.getType() != producer->getResult(0).getType() ||
        graph::getDevice(producer) != graph::getDevice(add))
      return nullptr;
    return producer;
  }

  /// Whether every reader of a norm's statistics comes after `add`, so the
  /// norm may move down to it.
  static bool statisticsReadAfter(graph::BatchNormTrainOp norm,
                                  graph::AddOp add) {
    for (Value stat : {norm.getMean(), norm.getVariance()})
      for (Operation *user : stat.getUsers())
        if (user->getBlock() != add->getBlock() || user->isBeforeInBlock(add))
          return false;
    return true;
  }

  /// Replaces `add` by `producer`, which now adds the other operand itself:
  /// it runs at the add (that operand may be computed after it) and takes
  /// the add's activation and, for diagnostics, its location.
  static void absorbAdd(Operation *producer, graph::AddOp add) {
    producer->moveBefore(add);
    if (auto activation = add.getActivationAttr())
      producer->setAttr("activation", activation);
    producer->setLoc(FusedLoc::get(producer->getContext(),
                                   {producer->getLoc(), add.getLoc()}));
    add.getResult().replaceAllUsesWith(producer->getResult(0));
    add.erase();
  }

  /// add(matmul(x, w), b) -> matmul(x, w, bias = b) for a b that holds one
  /// value per column, keeping the add's activation.
  static bool fuseMatMulBias(graph::AddOp add) {
    for (unsigned k = 0; k < 2; ++k) {
      auto matmul = absorbableProducer<graph::MatMulOp>(add, k);
      if (!matmul || matmul.getBias())
        continue;
      Value bias = add->getOperand(1 - k);
      auto result = cast<RankedTensorType>(matmul.getType());
      ArrayRef<int64_t> shape =
          cast<RankedTensorType>(bias.getType()).getShape();
      // A vector right operand has no columns to add a bias to.
      if (cast<RankedTensorType>(matmul.getRhs().getType()).getRank() < 2 ||
          result.getRank() == 0 || shape.empty() ||
          shape.back() != result.getShape().back() ||
          llvm::any_of(shape.drop_back(), [](int64_t d) { return d != 1; }))
        continue;
      matmul.getEpilogueMutable().assign(bias);
      absorbAdd(matmul, add);
      return true;
    }
    return false;
  }

  /// add(reshape(gemm(x, w, b)), z) -> reshape(matmul(x, w, bias = b,
  /// addend = reshape(z))) for a plain Gemm (no transposes, unit alpha and
  /// beta, a bias of one value per column) whose reshape keeps its columns
  /// and only regroups its rows: a linear layer exported as Gemm between
  /// reshapes (GPT-2's Conv1D) and its residual connection, one GEMM with
  /// the add in its epilogue instead of a pass over memory of its own.
  /// Reshapes are views, so the two new ones cost nothing.
  static bool fuseReshapedGemmResidual(graph::AddOp add) {
    for (unsigned k = 0; k < 2; ++k) {
      auto reshape = add->getOperand(k).getDefiningOp<graph::ReshapeOp>();
      Value other = add->getOperand(1 - k);
      if (!reshape || !reshape->hasOneUse() ||
          other.getType() != add.getType() ||
          reshape.getType() != add.getType() ||
          graph::getDevice(reshape) != graph::getDevice(add))
        continue;
      auto gemm = reshape.getInput().getDefiningOp<graph::GemmOp>();
      if (!gemm || !gemm->hasOneUse() || gemm.getActivation() ||
          gemm.getTransA() || gemm.getTransB() ||
          gemm.getAlpha().convertToDouble() != 1.0 ||
          gemm.getBeta().convertToDouble() != 1.0 ||
          graph::getDevice(gemm) != graph::getDevice(add))
        continue;
      auto result = cast<RankedTensorType>(gemm.getType());
      auto reshaped = cast<RankedTensorType>(reshape.getType());
      int64_t columns = result.getDimSize(1);
      if (reshaped.getRank() < 1 || reshaped.getShape().back() != columns)
        continue;
      Value bias = gemm.getC();
      if (bias) {
        ArrayRef<int64_t> shape =
            cast<RankedTensorType>(bias.getType()).getShape();
        if (shape.empty() || shape.back() != columns ||
            llvm::any_of(shape.drop_back(), [](int64_t d) { return d != 1; }))
          continue;
      }
      OpBuilder builder(add);
      Location loc = FusedLoc::get(
          add->getContext(), {gemm.getLoc(), reshape.getLoc(), add.getLoc()});
      auto flatOther = graph::ReshapeOp::create(
          builder, loc, result, other,
          builder.getDenseI64ArrayAttr(result.getShape()));
      SmallVector<Value> epilogue = {bias ? bias : zeroBias(add, columns),
                                     flatOther};
      auto matmul = graph::MatMulOp::create(builder, loc, result, gemm.getA(),
                                            gemm.getB(), epilogue,
                                            add.getActivationAttr());
      auto back = graph::ReshapeOp::create(builder, loc, reshaped, matmul,
                                           reshape.getShapeAttr());
      for (Operation *op : {flatOther.getOperation(), matmul.getOperation(),
                            back.getOperation()})
        for (NamedAttribute a : add->getDiscardableAttrs())
          op->setAttr(a.getName(), a.getValue());
      add.getResult().replaceAllUsesWith(back.getResult());
      add.erase();
      reshape.erase();
      gemm.erase();
      return true;
    }
    return false;
  }

  /// A zero bias of `size` values, for an epilogue that takes an addend
  /// only after a bias.
  static Value zeroBias(Operation *op, int64_t size) {
    OpBuilder builder(op);
    Type element =
        cast<RankedTensorType>(op->getResult(0).getType()).getElementType();
    auto type = RankedTensorType::get({size}, element);
    return graph::ConstantOp::create(
        builder, op->getLoc(), type,
        DenseElementsAttr::get(type, builder.getZeroAttr(element)));
  }

  /// add(layer_norm_grad(...).grad_input, z) -> layer_norm_grad(...,
  /// addend = z): a pre-norm transformer block's residual gradient. The
  /// gradient op stays where it is (its scale and bias gradients may be
  /// read before the add), so z must be computed before it, as the
  /// gradient arriving from the block above is.
  static bool fuseLayerNormGradResidual(graph::AddOp add) {
    if (add.getActivationAttr())
      return false;
    for (unsigned k = 0; k < 2; ++k) {
      auto grad = add->getOperand(k).getDefiningOp<graph::LayerNormGradOp>();
      Value other = add->getOperand(1 - k);
      if (!grad || grad.getAddend() || !grad.getGradInput().hasOneUse() ||
          grad.getGradInput().getType() != add.getType() ||
          other.getType() != add.getType() ||
          graph::getDevice(grad) != graph::getDevice(add))
        continue;
      Operation *source = other.getDefiningOp();
      if (source && (source->getBlock() != grad->getBlock() ||
                     !source->isBeforeInBlock(grad)))
        continue;
      grad.getAddendMutable().assign(other);
      grad->setLoc(
          FusedLoc::get(grad->getContext(), {grad->getLoc(), add.getLoc()}));
      add.getResult().replaceAllUsesWith(grad.getGradInput());
      add.erase();
      return true;
    }
    return false;
  }

  /// add(conv(x), z) -> conv(x, addend = z) and add(matmul(x, w), z) ->
  /// matmul(x, w, addend = z) for a weight matrix w (one GEMM), and
  /// add(batch_norm_train(x), z) -> batch_norm_train(x, addend = z) (a
  /// ResNet block's last norm in training), keeping the add's activation.
  static void fuseResidual(graph::AddOp add) {
    for (unsigned k = 0; k < 2; ++k) {
      Value other = add->getOperand(1 - k);
      if (other.getType() != add.getType())
        continue;
      if (auto norm = absorbableProducer<graph::BatchNormTrainOp>(add, k);
          norm && !norm.getAddend() && statisticsReadAfter(norm, add)) {
        norm.getAddendMutable().assign(other);
        absorbAdd(norm, add);
        return;
      }
      if (auto conv = absorbableProducer<graph::ConvOp>(add, k);
          conv && !conv.getAddend()) {
        auto type = cast<RankedTensorType>(conv.getType());
        if (!conv.getBias())
          conv.getEpilogueMutable().append(
              zeroBias(conv, conv.getChannelsLast() ? type.getShape().back()
                                                    : type.getDimSize(1)));
        conv.getEpilogueMutable().append(other);
        absorbAdd(conv, add);
        return;
      }
      auto matmul = absorbableProducer<graph::MatMulOp>(add, k);
      if (!matmul || matmul.getAddend() ||
          cast<RankedTensorType>(matmul.getRhs().getType()).getRank() != 2 ||
          cast<RankedTensorType>(matmul.getLhs().getType()).getRank() < 2)
        continue;
      if (!matmul.getBias())
        matmul.getEpilogueMutable().append(zeroBias(
            matmul,
            cast<RankedTensorType>(matmul.getType()).getShape().back()));
      matmul.getEpilogueMutable().append(other);
      absorbAdd(matmul, add);
      return;
    }
  }
};
} // namespace
} // namespace mlir::partc

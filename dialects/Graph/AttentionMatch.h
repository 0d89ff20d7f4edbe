//===- AttentionMatch.h - Attention as partc-fuse-attention fuses it -*- C++
//-*-===//
//
// Found in one place for the pass that fuses attention and for the cost
// model, which charges attention as the fused kernel at placement.
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_DIALECTS_GRAPH_ATTENTIONMATCH_H
#define PARTC_DIALECTS_GRAPH_ATTENTIONMATCH_H

#include "dialects/Graph/GraphOps.h"
#include "runtime/kernels/StridedMatMul.h"

#include <optional>

namespace mlir::partc::graph {

/// Attention's three ops: q x k^T (scaled), a softmax along the last axis
/// (with an additive mask or not), and the probabilities x v.
struct AttentionMatch {
  StridedMatMulOp scores;
  SoftmaxOp softmax;
  StridedMatMulOp weighted;
  /// The views the products read q, k (transposed: [batch..., D, N]) and v
  /// through.
  ::partc::runtime::strided::View q, k, v;
};

/// The attention whose last product is `weighted`, where partc's GPU
/// kernels take it as one op: each intermediate read only by the next op,
/// the scores stored unpermuted and read back whole and unscaled, one
/// element type (f32, bf16 or f16) for every operand, the views of
/// strided::attentionKernelFits. Devices are not compared.
std::optional<AttentionMatch> matchAttention(StridedMatMulOp weighted);

/// The same, found from its first product.
std::optional<AttentionMatch> matchAttentionFromScores(StridedMatMulOp scores);

/// The attributes of the graph.attention that fuses `match`, `causal` as
/// given: what partc-fuse-attention builds and the cost model looks up in
/// a cost table (the kernel's signature).
DictionaryAttr fusedAttentionAttributes(const AttentionMatch &match,
                                        bool causal);

/// Whether an attention's additive mask `bias`, broadcast to scores
/// [batch..., M, N], is -inf wherever the key's index exceeds the query's:
/// a mask folded to a constant, or where(c, x, -inf) with `c` false there
/// (a constant lower triangle, or the `and` of one with anything, through
/// reshapes, expands and casts that keep the [M, N] slices).
bool masksAboveDiagonal(Value bias, int64_t queries, int64_t keys);

/// Whether `v` is a constant whose every element is true.
bool isAllTrue(Value v);

/// The [M, N] extents of a causal attention's scores: given, the narrowing
/// below may also drop the mask's lower triangle, which the fused op's
/// `causal` restores.
using CausalExtents = std::optional<std::pair<int64_t, int64_t>>;

/// Of an `and` in an attention mask's condition, the operand that decides
/// it: the other is a constant all true or, under `causal`, an exact lower
/// triangle of [M, N] slices (true where the key's index is at most the
/// query's) inside a where filled with -inf above the diagonal, so that
/// only the causal masking tells them apart. Null where neither is.
Value decidingOperand(AndOp both, CausalExtents causal);

/// Whether `v` is a splat constant of -inf.
bool isMinusInfSplat(Value v);

/// Whether a causal attention's `bias` adds nothing but its causal masking
/// does: 0 wherever the key's index is at most the query's, -inf past it
/// (a constant, or where(lower triangle, 0, -inf)), so that the fused op
/// needs no bias (a decoder exported without a padding mask).
bool onlyHidesKeysPastQuery(Value bias, int64_t queries, int64_t keys);

/// The shape at which an attention's `bias` holds all it says: `bias`'s
/// own shape, narrowed to extent 1 along dimensions it only repeats
/// (through expands, the deciding operand of an `and`, and the casts and
/// wheres of such values). partc-fuse-attention hands the fused op the
/// bias at this shape; the cost model finds the fused kernel's signature
/// with it. `causal`: see CausalExtents (only within the condition of a
/// where whose other branch is -inf).
SmallVector<int64_t> narrowedBiasShape(Value bias, CausalExtents causal);

/// The bias graph.attention reads for `match` (null where it reads none,
/// onlyHidesKeysPastQuery) and its shape (narrowedBiasShape), `causal` as
/// masksAboveDiagonal says: what partc-fuse-attention hands the fused op,
/// for the cost model's bytes and signature.
std::pair<Value, SmallVector<int64_t>> fusedBias(AttentionMatch match,
                                                 bool causal);

} // namespace mlir::partc::graph

#endif // PARTC_DIALECTS_GRAPH_ATTENTIONMATCH_H

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

/// The shape at which an attention's `bias` holds all it says: `bias`'s
/// own shape, narrowed to extent 1 along dimensions it only repeats
/// (through expands, an `and` with a constant all true, and the casts and
/// wheres of such values). partc-fuse-attention hands the fused op the
/// bias at this shape; the cost model finds the fused kernel's signature
/// with it.
SmallVector<int64_t> narrowedBiasShape(Value bias);

} // namespace mlir::partc::graph

#endif // PARTC_DIALECTS_GRAPH_ATTENTIONMATCH_H

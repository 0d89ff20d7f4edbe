//===- StridedMatMul.h - MatMul over strided views --------------*- C++ -*-===//
//
// The `strided_matmul` kernel multiplies two strided views of its operands'
// buffers (what slices, reshapes and transposes of them would produce) and
// stores the logical result [batch..., M, N] permuted, so that attention's
// head splits and merges cost no copies. GEMM libraries take a matrix whose
// rows or columns are contiguous, with a leading dimension, and a batch of
// such matrices at arbitrary offsets; the rules and the translation to
// cuBLAS's column-major terms live here, host code only, so that the
// dialect's verifier, the CPU kernel and unit tests share them.
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_RUNTIME_KERNELS_STRIDEDMATMUL_H
#define PARTC_RUNTIME_KERNELS_STRIDEDMATMUL_H

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace partc::runtime {
class Status;
struct KernelArgs;
} // namespace partc::runtime

namespace partc::runtime::strided {

/// Element i of the view lies at offset + sum over d of i_d * strides[d].
struct View {
  std::vector<int64_t> shape, strides;
  int64_t offset = 0;
};

/// The product of `v`, or -1 where it overflows (or an entry is negative).
inline int64_t product(const std::vector<int64_t> &v) {
  int64_t p = 1;
  for (int64_t d : v)
    if (d < 0 || __builtin_mul_overflow(p, d, &p))
      return -1;
  return p;
}

/// The contiguous row-major view of `shape`.
inline View contiguous(const std::vector<int64_t> &shape) {
  View v;
  v.shape = shape;
  v.strides.assign(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    v.strides[d - 1] = v.strides[d] * shape[d];
  return v;
}

/// Reshapes the view to `shape` (the same elements in row-major order) if
/// strides can express it, as numpy does without a copy: dimensions that
/// merge must step contiguously over each other. False otherwise (`v`
/// unchanged).
inline bool reshape(View &v, const std::vector<int64_t> &shape) {
  std::vector<int64_t> oldShape, oldStrides;
  for (size_t d = 0; d < v.shape.size(); ++d)
    if (v.shape[d] != 1) {
      oldShape.push_back(v.shape[d]);
      oldStrides.push_back(v.strides[d]);
    }
  std::vector<int64_t> strides(shape.size(), 1);
  size_t oi = 0, ni = 0;
  while (oi < oldShape.size() && ni < shape.size()) {
    // The smallest groups of old and new dimensions with equal products.
    size_t oj = oi + 1, nj = ni + 1;
    int64_t oldProduct = oldShape[oi], newProduct = shape[ni];
    while (oldProduct != newProduct) {
      if (newProduct < oldProduct) {
        if (nj == shape.size())
          return false;
        newProduct *= shape[nj++];
      } else {
        if (oj == oldShape.size())
          return false;
        oldProduct *= oldShape[oj++];
      }
    }
    for (size_t k = oi; k + 1 < oj; ++k)
      if (oldStrides[k] != oldStrides[k + 1] * oldShape[k + 1])
        return false;
    strides[nj - 1] = oldStrides[oj - 1];
    for (size_t k = nj - 1; k > ni; --k)
      strides[k - 1] = strides[k] * shape[k];
    oi = oj;
    ni = nj;
  }
  if (oi != oldShape.size() || product(shape) != product(v.shape))
    return false;
  v.shape = shape;
  v.strides = std::move(strides);
  return true;
}

/// A row-major matrix (rows x cols at these strides) as a column-major
/// GEMM operand: stored as is (trans false) or as its transpose, with its
/// leading dimension. One dimension must step by 1 and the other by at
/// least the first one's extent; dimensions of extent 1 may have any
/// stride. False when neither form fits.
inline bool asOperand(int64_t rows, int64_t cols, int64_t rowStride,
                      int64_t colStride, bool &trans, int64_t &ld) {
  // Column-major means element (i, j) at i + j * ld: the rows step by 1.
  if ((rows == 1 || rowStride == 1) && (cols == 1 || colStride >= rows)) {
    trans = false;
    ld = cols == 1 ? std::max<int64_t>(rows, 1) : colStride;
    return true;
  }
  if ((cols == 1 || colStride == 1) && (rows == 1 || rowStride >= cols)) {
    trans = true;
    ld = rows == 1 ? std::max<int64_t>(cols, 1) : rowStride;
    return true;
  }
  return false;
}

/// Whether a row-major matrix view is a GEMM operand (asOperand's rule).
inline bool matrixSupported(int64_t rows, int64_t cols, int64_t rowStride,
                            int64_t colStride) {
  bool trans;
  int64_t ld;
  return asOperand(rows, cols, rowStride, colStride, trans, ld);
}

/// Whether the result's matrix (the last two of `logical`'s dimensions at
/// `strides`) keeps its rows or its columns contiguous, as GEMMs write.
inline bool resultContiguous(const std::vector<int64_t> &logical,
                             const std::vector<int64_t> &strides) {
  size_t rank = logical.size();
  return logical[rank - 1] == 1 || strides[rank - 1] == 1 ||
         logical[rank - 2] == 1 || strides[rank - 2] == 1;
}

/// Whether the batch lies at one stride (offsets[i] = offsets[0] + i *
/// stride), as strided batched GEMMs need.
inline bool evenStride(const std::vector<int64_t> &offsets, int64_t &stride) {
  stride = offsets.size() > 1 ? offsets[1] - offsets[0] : 0;
  for (size_t i = 1; i < offsets.size(); ++i)
    if (offsets[i] - offsets[i - 1] != stride)
      return false;
  return true;
}

/// Strides of the logical result inside the stored one, which holds the
/// logical result permuted by `perm` (stored dimension i is logical
/// dimension perm[i]) and contiguous.
inline std::vector<int64_t> resultStrides(const std::vector<int64_t> &logical,
                                          const std::vector<int64_t> &perm) {
  std::vector<int64_t> strides(logical.size(), 0);
  int64_t step = 1;
  for (size_t i = perm.size(); i-- > 0;) {
    strides[perm[i]] = step;
    step *= logical[perm[i]];
  }
  return strides;
}

/// Checks the operand views of a strided_matmul against their buffers'
/// element counts and the stored result's shape; sets `logical` to the
/// result's logical shape. Returns an error message, empty when valid.
inline std::string checkOperands(const View &lhs, int64_t lhsElements,
                                 const View &rhs, int64_t rhsElements,
                                 const std::vector<int64_t> &perm,
                                 const std::vector<int64_t> &stored,
                                 std::vector<int64_t> &logical) {
  auto str = [](const std::vector<int64_t> &v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i)
      s += (i ? "," : "") + std::to_string(v[i]);
    return s + "]";
  };
  size_t rank = lhs.shape.size();
  if (rank < 2 || rank > 8 || rhs.shape.size() != rank)
    return "operand views must have one rank between 2 and 8, got " +
           str(lhs.shape) + " and " + str(rhs.shape);
  const char *names[2] = {"lhs", "rhs"};
  const View *views[2] = {&lhs, &rhs};
  int64_t elements[2] = {lhsElements, rhsElements};
  for (int i = 0; i < 2; ++i) {
    const View &v = *views[i];
    if (v.strides.size() != rank)
      return std::string(names[i]) + " view has " +
             std::to_string(v.strides.size()) + " strides for rank " +
             std::to_string(rank);
    int64_t last = v.offset;
    for (size_t d = 0; d < rank; ++d) {
      if (v.shape[d] < 1 || v.strides[d] < 0)
        return std::string(names[i]) + " view " + str(v.shape) +
               " with strides " + str(v.strides) +
               " needs extents >= 1 and strides >= 0";
      int64_t reach;
      if (__builtin_mul_overflow(v.shape[d] - 1, v.strides[d], &reach) ||
          __builtin_add_overflow(last, reach, &last))
        return std::string(names[i]) + " view " + str(v.shape) +
               " with strides " + str(v.strides) + " overflows 64 bits";
    }
    if (v.offset < 0 || last >= elements[i])
      return std::string(names[i]) + " view " + str(v.shape) +
             " with strides " + str(v.strides) + " at offset " +
             std::to_string(v.offset) + " reaches element " +
             std::to_string(last) + " of a buffer of " +
             std::to_string(elements[i]);
  }
  int64_t m = lhs.shape[rank - 2], k = lhs.shape[rank - 1];
  int64_t n = rhs.shape[rank - 1];
  if (rhs.shape[rank - 2] != k)
    return "contraction extents differ: " + str(lhs.shape) + " x " +
           str(rhs.shape);
  logical.assign(rank, 0);
  for (size_t d = 0; d + 2 < rank; ++d) {
    int64_t a = lhs.shape[d], b = rhs.shape[d];
    if (a != b && a != 1 && b != 1)
      return "batch extents of " + str(lhs.shape) + " and " + str(rhs.shape) +
             " do not broadcast";
    logical[d] = std::max(a, b);
  }
  logical[rank - 2] = m;
  logical[rank - 1] = n;
  std::vector<bool> seen(rank, false);
  if (perm.size() != rank)
    return "result permutation " + str(perm) + " must have rank " +
           std::to_string(rank);
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(rank) || seen[p])
      return "result permutation " + str(perm) + " is not a permutation";
    seen[p] = true;
  }
  if (product(stored) < 0 || product(stored) != product(logical))
    return "stored result " + str(stored) + " does not hold the " +
           str(logical) + " result";
  if (!matrixSupported(m, k, lhs.strides[rank - 2], lhs.strides[rank - 1]) ||
      !matrixSupported(k, n, rhs.strides[rank - 2], rhs.strides[rank - 1]))
    return "operand matrices need rows or columns at stride 1 and the other "
           "stride at least that extent, got strides " +
           str(lhs.strides) + " and " + str(rhs.strides);
  if (!resultContiguous(logical, resultStrides(logical, perm)))
    return "result permutation " + str(perm) +
           " must keep the result's rows or columns contiguous";
  return "";
}

/// A batch of GEMMs in cuBLAS's column-major terms:
/// C (rows x cols, leading dimension ldc) = op(X) (rows x depth) *
/// op(Y) (depth x cols), where op transposes when trans is set and each
/// operand's leading dimension is ld. Matrix i of the batch starts at
/// element offsets[i] of its buffer.
struct Gemm {
  struct Operand {
    bool lhs = true; // from the strided_matmul's lhs, else its rhs
    bool trans = false;
    int64_t ld = 1;
    std::vector<int64_t> offsets;
  };
  int64_t rows = 0, cols = 0, depth = 0;
  Operand x, y;
  int64_t ldc = 1;
  std::vector<int64_t> cOffsets;

  /// The batch lies at one stride per operand (offsets[i] = offsets[0] +
  /// i * stride), as strided batched GEMMs need.
  bool evenlyStrided(int64_t &xStride, int64_t &yStride,
                     int64_t &cStride) const {
    return evenStride(x.offsets, xStride) && evenStride(y.offsets, yStride) &&
           evenStride(cOffsets, cStride);
  }
};

namespace detail {

/// Drops batch dimension d from the three views.
inline void dropDim(View &a, View &b, View &c, size_t d) {
  for (View *v : {&a, &b, &c}) {
    v->shape.erase(v->shape.begin() + d);
    v->strides.erase(v->strides.begin() + d);
  }
}

} // namespace detail

/// Translates a checked strided_matmul (operand views and the logical
/// result's view of the stored result) into a batch of column-major GEMMs.
/// Batch dimensions of extent 1 are dropped, and batch dimensions over
/// which the rhs is shared fold into the lhs's rows where the lhs and the
/// result step over them as over whole matrices (one large GEMM instead
/// of a batch). False when a view is not a GEMM operand.
inline bool planGemm(View lhs, View rhs, View result, Gemm &g) {
  size_t rank = result.shape.size();
  for (size_t d = rank - 2; d-- > 0;)
    if (result.shape[d] == 1)
      detail::dropDim(lhs, rhs, result, d), --rank;
  while (rank > 2) {
    size_t j = rank - 3, mDim = rank - 2;
    int64_t e = result.shape[j];
    if (rhs.shape[j] != 1 || lhs.shape[j] != e)
      break;
    int64_t m = lhs.shape[mDim];
    int64_t aRow = m == 1 ? lhs.strides[j] : lhs.strides[mDim];
    int64_t cRow = m == 1 ? result.strides[j] : result.strides[mDim];
    if (lhs.strides[j] != m * aRow || result.strides[j] != m * cRow ||
        !matrixSupported(m * e, lhs.shape[rank - 1], aRow,
                         lhs.strides[rank - 1]) ||
        !matrixSupported(m * e, result.shape[rank - 1], cRow,
                         result.strides[rank - 1]))
      break;
    lhs.shape[mDim] = result.shape[mDim] = m * e;
    lhs.strides[mDim] = aRow;
    result.strides[mDim] = cRow;
    detail::dropDim(lhs, rhs, result, j);
    --rank;
  }
  int64_t m = result.shape[rank - 2], n = result.shape[rank - 1];
  int64_t k = lhs.shape[rank - 1];
  const int64_t *as = &lhs.strides[rank - 2], *bs = &rhs.strides[rank - 2],
                *cs = &result.strides[rank - 2];
  // Column-major C with rows stepping by 1 is either the result itself
  // (its M dimension contiguous) or its transpose (N contiguous), for
  // which C^T = B^T A^T swaps the operands.
  bool ok;
  if (n == 1 || cs[1] == 1) {
    g.rows = n, g.cols = m, g.depth = k;
    g.ldc = m == 1 ? std::max<int64_t>(n, 1) : cs[0];
    g.x.lhs = false, g.y.lhs = true;
    ok = asOperand(n, k, bs[1], bs[0], g.x.trans, g.x.ld) &&
         asOperand(k, m, as[1], as[0], g.y.trans, g.y.ld);
  } else if (m == 1 || cs[0] == 1) {
    g.rows = m, g.cols = n, g.depth = k;
    g.ldc = n == 1 ? std::max<int64_t>(m, 1) : cs[1];
    g.x.lhs = true, g.y.lhs = false;
    ok = asOperand(m, k, as[0], as[1], g.x.trans, g.x.ld) &&
         asOperand(k, n, bs[0], bs[1], g.y.trans, g.y.ld);
  } else {
    return false;
  }
  if (!ok || g.ldc < g.rows)
    return false;
  // Offsets of each matrix, batch dimensions in row-major order.
  size_t batchRank = rank - 2;
  std::vector<int64_t> index(batchRank, 0);
  int64_t count = 1;
  for (size_t d = 0; d < batchRank; ++d)
    count *= result.shape[d];
  g.x.offsets.clear(), g.y.offsets.clear(), g.cOffsets.clear();
  for (int64_t i = 0; i < count; ++i) {
    int64_t a = lhs.offset, b = rhs.offset, c = result.offset;
    for (size_t d = 0; d < batchRank; ++d) {
      a += lhs.shape[d] == 1 ? 0 : index[d] * lhs.strides[d];
      b += rhs.shape[d] == 1 ? 0 : index[d] * rhs.strides[d];
      c += index[d] * result.strides[d];
    }
    (g.x.lhs ? g.x : g.y).offsets.push_back(a);
    (g.x.lhs ? g.y : g.x).offsets.push_back(b);
    g.cOffsets.push_back(c);
    for (size_t d = batchRank; d-- > 0;) {
      if (++index[d] < result.shape[d])
        break;
      index[d] = 0;
    }
  }
  return true;
}

/// Reads and checks a strided_matmul kernel's attributes (lhs_shape,
/// lhs_strides, lhs_offset, the rhs's likewise, perm, alpha) against its
/// operand types; `result` becomes the logical result's view of the stored
/// result (LinearAlgebra.cpp).
Status parseKernel(const KernelArgs &args, View &lhs, View &rhs, View &result,
                   double &alpha);

/// graph.attention: softmax(scale * q k^T + bias) v, the scores [batch...,
/// M, N] never stored. `k` is the keys' transposed view [batch..., D, N].
struct Attention {
  View q, k, v;
  /// The logical result [batch..., M, Dv]'s view of the stored result.
  View result;
  /// The scores' logical shape [batch..., M, N].
  std::vector<int64_t> scores;
  double scale = 1;
  bool nanToZero = false;
  /// Keys past each query are hidden (-inf), whatever the bias says there.
  bool causal = false;
};

/// Checks an attention's views as the two strided_matmuls it fuses (q x k
/// into the contiguous scores, scores x v into the stored result); sets
/// `scores` and `logical` (the result's logical shape). Returns an error
/// message, empty when valid.
inline std::string checkAttention(const View &q, int64_t qElements,
                                  const View &k, int64_t kElements,
                                  const View &v, int64_t vElements,
                                  const std::vector<int64_t> &perm,
                                  const std::vector<int64_t> &stored,
                                  std::vector<int64_t> &scores,
                                  std::vector<int64_t> &logical) {
  size_t rank = q.shape.size();
  if (rank < 2 || k.shape.size() != rank || v.shape.size() != rank)
    return "q, k and v views need one rank of at least 2";
  std::vector<int64_t> identity(rank), scoresShape(rank);
  for (size_t d = 0; d < rank; ++d) {
    identity[d] = static_cast<int64_t>(d);
    scoresShape[d] = d + 2 < rank ? std::max(q.shape[d], k.shape[d]) : 0;
  }
  scoresShape[rank - 2] = q.shape[rank - 2];
  scoresShape[rank - 1] = k.shape[rank - 1];
  std::string error =
      checkOperands(q, qElements, k, kElements, identity, scoresShape, scores);
  if (!error.empty())
    return "q x k: " + error;
  error = checkOperands(contiguous(scores), product(scores), v, vElements, perm,
                        stored, logical);
  if (!error.empty())
    return "scores x v: " + error;
  return "";
}

/// Whether the GPU's fused kernel takes these views: a head size D of 16,
/// 32, 64 or 128 for both q k^T and the values, each head's elements
/// contiguous in q, k, v and the stored result, at most 4 batch
/// dimensions. partc-fuse-attention fuses only these.
inline bool attentionKernelFits(const View &q, const View &k, const View &v,
                                const std::vector<int64_t> &perm) {
  size_t rank = q.shape.size();
  if (rank < 2 || rank > 6 || k.shape.size() != rank ||
      v.shape.size() != rank || perm.size() != rank)
    return false;
  int64_t d = q.shape[rank - 1];
  return (d == 16 || d == 32 || d == 64 || d == 128) &&
         v.shape[rank - 1] == d && q.strides[rank - 1] == 1 &&
         k.strides[rank - 2] == 1 && v.strides[rank - 1] == 1 &&
         perm[rank - 1] == static_cast<int64_t>(rank - 1);
}

/// Reads and checks an attention kernel's attributes against its operand
/// types (LinearAlgebra.cpp).
Status parseAttention(const KernelArgs &args, Attention &attention);

} // namespace partc::runtime::strided

#endif // PARTC_RUNTIME_KERNELS_STRIDEDMATMUL_H

//===- OpCost.h - Predicted time of graph ops on a device -------*- C++ -*-===//
#ifndef PARTC_COMPILER_COSTMODEL_OPCOST_H
#define PARTC_COMPILER_COSTMODEL_OPCOST_H

#include "compiler/CostModel/Topology.h"
#include "runtime/Support.h"
#include "runtime/kernels/Attrs.h"

#include "mlir/IR/Operation.h"

#include <map>
#include <string>

namespace partc::costmodel {

enum class OpClass { Matrix, Vector, Movement, View };

/// What an op does, independent of any device. Batch-proportional parts
/// scale with the micro-batch; weights do not.
struct OpWork {
  OpClass cls = OpClass::Vector;
  double flops = 0;
  double activationBytes = 0; // bytes read and written that scale with batch
  double weightBytes = 0;     // constant operands
  double outputBytes = 0;     // results (what stays live)
  /// What the op reaches of the device's matrix rate (above 1 where it
  /// beats the preset's fit: 16-bit GEMMs). Also the share of the matrix
  /// units' reduction tile a convolution fills:
  /// below 32 input channels per group (rounded up to 4, as the GPU kernels
  /// widen them) implicit GEMMs leave the rest idle. ResNet-50's 3-channel
  /// stem ran at 38 TFLOP/s on an H200 where its other convolutions ran
  /// at 100 to 350 (profile, 2026-11-22).
  double matrixUtilization = 1.0;
  /// What a vector op reaches of the device's vector rate (partc's
  /// depthwise convolution kernel: issue-bound well below it).
  double vectorUtilization = 1.0;
  /// Products on bf16 or f16 operands run at the tensor cores' 16-bit
  /// rate (--precision).
  bool sixteenBit = false;
  /// The kernel's fixed cost beyond its roofline, as a share of the
  /// device's launchSeconds (below 1 for the kernels profiles show pay
  /// less: 16-bit GEMMs, layer norms).
  double fixedShare = 1.0;
  bool batched = false;
  std::string signature; // kernel signature, for cost tables
  /// What the signature is made of, to name the kernel at a micro-batch.
  std::string kernel;
  ::partc::runtime::AttrMap attrs;
  std::vector<::partc::runtime::TensorType> inputs, outputs;
  std::vector<bool> inputIsWeight;
  /// The signature with dimension 0 of every activation (not weight) equal
  /// to `batch` set to `slice`.
  std::string signatureAt(int64_t batch, int64_t slice) const;
};

/// With `fusedAttention` (inference: partc-fuse-attention runs after
/// placement), attention's last product is charged as the fused kernel
/// and its first product and softmax as views.
OpWork analyzeOp(mlir::Operation *op, bool batched,
                 bool fusedAttention = false);

/// Measured seconds per kernel signature (from partc-run --profile).
class CostTable {
public:
  llvm::Error load(const std::string &path);
  /// Loads each of `paths`, separated by commas (profiles at several batch
  /// sizes merge).
  llvm::Error loadAll(llvm::StringRef paths);
  bool empty() const { return seconds_.empty(); }
  const double *lookup(const std::string &signature) const {
    auto it = seconds_.find(signature);
    return it == seconds_.end() ? nullptr : &it->second;
  }

private:
  std::map<std::string, double> seconds_;
  /// Instances averaged into each signature's time.
  std::map<std::string, int> counts_;
};

/// Roofline time of `work` scaled to `fraction` of the batch, plus the
/// launch cost. With a cost table, a kernel measured at the slice itself
/// (`batch` -> `slice` rows, e.g. profiled from a plan compiled at that
/// batch) replaces it; else a full-batch measurement, scaled by `fraction`
/// for batched ops (optimistic for small slices).
double predictSeconds(const OpWork &work, double fraction,
                      const DeviceSpec &device, bool tf32,
                      const CostTable *table, int64_t batch = 0,
                      int64_t slice = 0);

} // namespace partc::costmodel

#endif // PARTC_COMPILER_COSTMODEL_OPCOST_H

//===- Topology.h - Devices and links for the cost model --------*- C++ -*-===//
#ifndef PARTC_COMPILER_COSTMODEL_TOPOLOGY_H
#define PARTC_COMPILER_COSTMODEL_TOPOLOGY_H

#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace partc::costmodel {

/// Sustained capabilities of one accelerator (peak figures times the
/// efficiency partc's kernels reach; see docs/cost-model.md for sources).
struct DeviceSpec {
  std::string name;
  double memoryBytes = 0;
  /// Matrix (GEMM/convolution) FLOP/s for fp32 without and with TF32, bf16.
  double matrixFlopsFp32 = 0, matrixFlopsTf32 = 0, matrixFlopsBf16 = 0;
  /// Element-wise FLOP/s (fp32 CUDA cores).
  double vectorFlops = 0;
  /// Device memory bandwidth, bytes/s (read + write).
  double memoryBytesPerSecond = 0;
  /// A device-to-device copy within the device, bytes/s (read + write).
  double copyBytesPerSecond = 0;
  /// Fixed cost of one kernel launch (with CUDA graphs, the per-node cost).
  double launchSeconds = 0;
  /// The gap between two kernels of a CUDA graph, added to a kernel time
  /// measured in isolation (a cost table's); launchSeconds already holds
  /// it for analytic estimates.
  double kernelGapSeconds = 0;
  /// Streaming multiprocessors: how many blocks a kernel needs to fill the
  /// device (partc-assign-streams runs small branches side by side).
  double multiprocessors = 132;
};

struct LinkSpec {
  double bytesPerSecond = 0; // one direction
  double latencySeconds = 0;
};

class Topology {
public:
  /// "4xh200", "2xh100", "8xh100-pcie", "h200" or a plain count ("4", which
  /// means H200s, the machines partc is developed on).
  static llvm::Expected<Topology> fromShorthand(const std::string &spec);
  /// A JSON description (docs/cost-model.md has the schema).
  static llvm::Expected<Topology> fromJsonFile(const std::string &path);
  static std::vector<std::string> presetNames();

  size_t size() const { return devices.size(); }
  const LinkSpec &link(size_t a, size_t b) const {
    return links[a * devices.size() + b];
  }
  /// The slowest link among devices [first, first + count).
  LinkSpec slowestLink(size_t first, size_t count) const;
  /// Devices [0, groups * perGroup) ordered so that each run of `perGroup`
  /// is a pipeline's chain of devices over fast links: a chain starts at
  /// the lowest free device and grows by the free device with the fastest
  /// link from its last one (ties to the lower index), so uniform machines
  /// keep index order.
  std::vector<size_t> chainGroups(size_t groups, size_t perGroup) const;
  /// The slowest link between consecutive devices of any chain of `order`.
  LinkSpec slowestChainLink(const std::vector<size_t> &order,
                            size_t perGroup) const;
  double smallestMemory() const;
  /// The slowest capabilities of any device: plans are costed against it,
  /// so mixed machines are modeled conservatively.
  DeviceSpec weakest() const;
  std::string describe() const;

  std::vector<DeviceSpec> devices;
  std::vector<LinkSpec> links; // size() x size(), row-major
  bool tf32 = true;
};

} // namespace partc::costmodel

#endif // PARTC_COMPILER_COSTMODEL_TOPOLOGY_H

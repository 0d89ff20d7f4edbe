//===- BucketAllReduces.cpp - partc-bucket-all-reduces --------------------===//
//
// Merges runs of consecutive gradient averages into buckets. Every device
// of a group gets the same buckets: they are chosen on the group sequence,
// which all devices of a set of replicas meet in the same order, and each
// device's bucket op takes the place of its last member, where every input
// is computed.
//
//===----------------------------------------------------------------------===//
#include "compiler/Passes.h"
#include "compiler/Utils/PassUtils.h"

#include "dialects/Graph/GraphDialect.h"
#include "dialects/Graph/GraphOps.h"
#include "dialects/Graph/RuntimeBridge.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <map>

namespace mlir::partc {
#define GEN_PASS_DEF_BUCKETALLREDUCES
#include "compiler/Passes.h.inc"

namespace {

/// One group: its op on each of its devices, by device.
struct Group {
  std::map<int64_t, graph::AllReduceOp> onDevice;
  ArrayRef<int64_t> devices;
  int64_t bytes = 0;
};

class BucketAllReducesPass
    : public impl::BucketAllReducesBase<BucketAllReducesPass> {
public:
  using BucketAllReducesBase::BucketAllReducesBase;

  void runOnOperation() override {
    if (bucketBytes < 1) {
      getOperation().emitError()
          << "bucket-bytes is " << static_cast<int64_t>(bucketBytes)
          << "; a bucket holds at least 1 byte (1 keeps one all-reduce per "
             "gradient)";
      return signalPassFailure();
    }
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (!func.isExternal() && failed(bucket(func.getBody().front())))
        return signalPassFailure();
    recordPlacement(getOperation(), "all_reduce_bucket_bytes",
                    std::to_string(bucketBytes));
  }

private:
  LogicalResult bucket(Block &body) {
    // Groups in the order devices first meet them; each device's own
    // sequence of groups.
    SmallVector<int64_t> order;
    std::map<int64_t, Group> groups;
    std::map<int64_t, SmallVector<int64_t>> sequence;
    for (auto reduce : body.getOps<graph::AllReduceOp>()) {
      std::optional<int64_t> device = graph::getDevice(reduce);
      if (!device)
        return reduce.emitOpError()
               << "of group " << reduce.getGroup()
               << " is not placed on a device; hint: buckets are formed "
                  "after partc-replicate-training places every replica";
      Group &g = groups[reduce.getGroup()];
      if (g.onDevice.empty()) {
        order.push_back(reduce.getGroup());
        g.devices = reduce.getDevices();
        for (Value input : reduce.getInputs())
          g.bytes += static_cast<int64_t>(
              toTensorType(cast<ShapedType>(input.getType())).byteSize());
      }
      if (!g.onDevice.try_emplace(*device, reduce).second)
        return reduce.emitOpError()
               << "meets group " << reduce.getGroup() << " twice on device "
               << *device << "; each device has one op of a group";
      sequence[*device].push_back(reduce.getGroup());
    }
    // Where each group comes in each device's sequence.
    std::map<std::pair<int64_t, int64_t>, size_t> place;
    for (auto &[device, groupsMet] : sequence)
      for (auto [i, group] : llvm::enumerate(groupsMet))
        place[{device, group}] = i;

    SmallVector<SmallVector<int64_t>> buckets;
    int64_t bucketBytesSoFar = 0;
    for (int64_t group : order) {
      Group &g = groups[group];
      if (!buckets.empty() &&
          joins(buckets.back(), group, groups, place, bucketBytesSoFar)) {
        buckets.back().push_back(group);
        bucketBytesSoFar += g.bytes;
        continue;
      }
      buckets.push_back({group});
      bucketBytesSoFar = g.bytes;
    }

    OpBuilder builder(body.getParentOp()->getContext());
    for (ArrayRef<int64_t> members : buckets) {
      if (members.size() < 2)
        continue;
      const Group &last = groups[members.back()];
      for (auto [device, lastOp] : last.onDevice) {
        SmallVector<Value> inputs;
        SmallVector<graph::AllReduceOp> merged;
        for (int64_t member : members) {
          graph::AllReduceOp op = groups[member].onDevice.at(device);
          llvm::append_range(inputs, op.getInputs());
          merged.push_back(op);
        }
        builder.setInsertionPoint(lastOp);
        auto bucketOp = graph::AllReduceOp::create(
            builder, lastOp.getLoc(), inputs, lastOp.getGroupAttr(),
            lastOp.getDevicesAttr());
        // The last member's placement and schedule attributes.
        for (NamedAttribute attr : lastOp->getDiscardableAttrs())
          bucketOp->setAttr(attr.getName(), attr.getValue());
        ResultRange means = bucketOp.getOutputs();
        size_t next = 0;
        for (graph::AllReduceOp op : merged) {
          for (Value mean : op.getOutputs())
            mean.replaceAllUsesWith(means[next++]);
          op.erase();
        }
      }
    }
    renumberAllReduceGroups(body);
    return success();
  }

  /// Whether `group` may join `bucket`: the same devices, within the
  /// limit, next after the bucket on each device, and no mean of the
  /// bucket read before `group`'s op (where the bucket's op will be).
  bool joins(ArrayRef<int64_t> bucket, int64_t group,
             std::map<int64_t, Group> &groups,
             const std::map<std::pair<int64_t, int64_t>, size_t> &place,
             int64_t bytesSoFar) {
    const Group &g = groups[group];
    const Group &first = groups[bucket.front()];
    if (g.devices != first.devices || bytesSoFar + g.bytes > bucketBytes)
      return false;
    for (auto [device, op] : g.onDevice) {
      auto at = place.find({device, group});
      auto previous = place.find({device, bucket.back()});
      if (previous == place.end() || at->second != previous->second + 1)
        return false;
      for (int64_t member : bucket)
        for (Value mean : groups[member].onDevice.at(device).getOutputs())
          for (Operation *user : mean.getUsers())
            if (user->getBlock() != op->getBlock() ||
                !op->isBeforeInBlock(user))
              return false;
    }
    return true;
  }
};

} // namespace
} // namespace mlir::partc

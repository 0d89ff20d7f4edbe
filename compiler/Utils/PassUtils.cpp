//===- PassUtils.cpp ------------------------------------------------------===//
#include "compiler/Utils/PassUtils.h"

#include "dialects/Graph/GraphOps.h"
#include "dialects/Graph/RuntimeBridge.h"

#include "llvm/ADT/SetVector.h"

#include <cstdio>
#include <cstring>

namespace mlir::partc {

std::string onnxNodeName(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations()) {
      std::string n = onnxNodeName(inner);
      if (!n.empty())
        return n;
    }
  if (auto callsite = dyn_cast<CallSiteLoc>(loc))
    return onnxNodeName(callsite.getCallee());
  return "";
}

bool locationNamesNode(Location loc, StringRef name) {
  if (auto n = dyn_cast<NameLoc>(loc))
    return n.getName() == name;
  if (auto fused = dyn_cast<FusedLoc>(loc))
    return llvm::any_of(fused.getLocations(), [&](Location inner) {
      return locationNamesNode(inner, name);
    });
  if (auto callsite = dyn_cast<CallSiteLoc>(loc))
    return locationNamesNode(callsite.getCallee(), name);
  return false;
}

FailureOr<func::FuncOp> getMainFunction(ModuleOp module) {
  auto func = module.lookupSymbol<func::FuncOp>("main");
  if (!func || func.getBody().empty())
    return module.emitError()
               << "expected a func.func @main with a body (the ONNX importer's "
                  "output)",
           failure();
  if (!func.getBody().hasOneBlock())
    return func.emitError() << "@main must have a single block", failure();
  return func;
}

int64_t getNumDevices(ModuleOp module) {
  if (auto a = module->getAttrOfType<IntegerAttr>("graph.num_devices"))
    return a.getInt();
  return 1;
}

void setNumDevices(ModuleOp module, int64_t n) {
  module->setAttr(
      "graph.num_devices",
      IntegerAttr::get(IntegerType::get(module.getContext(), 64), n));
}

void placeUnplacedOps(func::FuncOp func) {
  Block &body = func.getBody().front();
  auto needsDevice = [](Operation &op) {
    return !isa<graph::ConstantOp, func::ReturnOp>(op) &&
           !graph::getDevice(&op);
  };
  auto placedDef = [](Value v) -> std::optional<int64_t> {
    Operation *def = v.getDefiningOp();
    if (!def || isa<graph::VariableOp>(def))
      return std::nullopt;
    auto device = graph::getDevice(def);
    if (device == graph::kHostDevice)
      return std::nullopt;
    return device;
  };
  if (llvm::none_of(body, [](Operation &op) {
        return graph::getDevice(&op).has_value();
      }))
    return;
  // Computations: users first (in reverse, so chains resolve), else the
  // latest placed operand.
  for (Operation &op : llvm::reverse(body)) {
    if (!needsDevice(op) ||
        isa<graph::VariableOp, graph::StateUpdateOpInterface>(op))
      continue;
    std::optional<int64_t> first;
    Operation *firstUser = nullptr;
    for (Operation *user : op.getUsers())
      if (auto d = graph::getDevice(user);
          d && *d != graph::kHostDevice &&
          (!firstUser || user->isBeforeInBlock(firstUser))) {
        firstUser = user;
        first = d;
      }
    if (first)
      graph::setDevice(&op, *first);
  }
  for (Operation &op : body) {
    if (!needsDevice(op) ||
        isa<graph::VariableOp, graph::StateUpdateOpInterface>(op))
      continue;
    std::optional<int64_t> latest;
    for (Value v : op.getOperands())
      if (auto d = placedDef(v))
        latest = std::max(latest.value_or(0), *d);
    if (latest)
      graph::setDevice(&op, *latest);
  }
  // An update where what it reads is computed (its gradient, its batch's
  // statistics); a variable with its first user; an update left with its
  // variable.
  for (auto update : body.getOps<graph::StateUpdateOpInterface>()) {
    Operation *op = update.getOperation();
    if (!needsDevice(*op))
      continue;
    SmallVector<unsigned> written = update.getUpdatedOperands();
    for (auto [i, v] : llvm::enumerate(op->getOperands()))
      if (!llvm::is_contained(written, i))
        if (auto d = placedDef(v)) {
          graph::setDevice(op, *d);
          break;
        }
  }
  for (auto variable : body.getOps<graph::VariableOp>()) {
    if (!needsDevice(*variable))
      continue;
    Operation *firstUser = nullptr;
    for (Operation *user : variable->getUsers())
      if (graph::getDevice(user) &&
          (!firstUser || user->isBeforeInBlock(firstUser)))
        firstUser = user;
    if (firstUser)
      graph::setDevice(variable, *graph::getDevice(firstUser));
  }
  for (auto update : body.getOps<graph::StateUpdateOpInterface>()) {
    Operation *op = update.getOperation();
    if (!needsDevice(*op))
      continue;
    for (unsigned i : update.getUpdatedOperands())
      if (Operation *def = op->getOperand(i).getDefiningOp())
        if (auto d = graph::getDevice(def)) {
          graph::setDevice(op, *d);
          break;
        }
  }
}

bool isHostValue(Value v) {
  Operation *def = v.getDefiningOp();
  if (!def)
    return true;
  if (isa<graph::ConstantOp>(def))
    return true;
  return graph::getDevice(def) == graph::kHostDevice;
}

LogicalResult reinferTypes(Operation *op) {
  auto infer = dyn_cast<InferTypeOpInterface>(op);
  if (!infer)
    return op->emitOpError() << "cannot re-infer its result types";
  SmallVector<Type> types;
  if (failed(infer.inferReturnTypes(op->getContext(), op->getLoc(),
                                    op->getOperands(), op->getAttrDictionary(),
                                    op->getPropertiesStorage(),
                                    op->getRegions(), types)))
    return failure();
  for (auto [r, t] : llvm::zip(op->getResults(), types))
    r.setType(t);
  return success();
}

std::optional<double> scalarF32Constant(Value v) {
  auto constant = v.getDefiningOp<graph::ConstantOp>();
  auto type = cast<RankedTensorType>(v.getType());
  if (!constant || type.getNumElements() != 1 || !type.getElementType().isF32())
    return std::nullopt;
  auto dense = dyn_cast<DenseFPElementsAttr>(constant.getValue());
  if (!dense)
    return std::nullopt;
  return (*dense.value_begin<APFloat>()).convertToDouble();
}

bool isUniformFloatConstant(Value v, double value) {
  auto constant = v.getDefiningOp<graph::ConstantOp>();
  if (!constant)
    return false;
  Type element = cast<RankedTensorType>(v.getType()).getElementType();
  if (!isa<FloatType>(element))
    return false;
  if (auto dense = dyn_cast<DenseElementsAttr>(constant.getValue())) {
    // A splat's range still counts every element (2^40 of them from a
    // ConstantOfShape, found by the compile fuzzer): read its one value.
    if (dense.isSplat())
      return dense.getSplatValue<APFloat>().convertToDouble() == value;
    return llvm::all_of(dense.getValues<APFloat>(), [&](const APFloat &f) {
      return f.convertToDouble() == value;
    });
  }
  std::vector<uint8_t> scratch;
  ArrayRef<uint8_t> bytes = constantBytes(constant.getValue(), scratch);
  auto allEqual = [&](auto zero) {
    using T = decltype(zero);
    for (size_t i = 0; i + sizeof(T) <= bytes.size(); i += sizeof(T)) {
      T f;
      std::memcpy(&f, bytes.data() + i, sizeof(T));
      if (f != value)
        return false;
    }
    return !bytes.empty();
  };
  if (element.isF32())
    return allEqual(0.f);
  return element.isF64() && allEqual(0.0);
}

std::optional<int64_t> scalarIntConstant(Value v) {
  auto constant = v.getDefiningOp<graph::ConstantOp>();
  auto type = cast<RankedTensorType>(v.getType());
  if (!constant || type.getNumElements() != 1 ||
      !type.getElementType().isInteger())
    return std::nullopt;
  auto dense = dyn_cast<DenseIntElementsAttr>(constant.getValue());
  if (!dense)
    return std::nullopt;
  return (*dense.value_begin<APInt>()).getSExtValue();
}

void eraseWithTheirConstants(ArrayRef<Operation *> ops) {
  llvm::SetVector<Operation *> constants;
  for (Operation *op : ops)
    for (Value v : op->getOperands())
      if (auto c = v.getDefiningOp<graph::ConstantOp>())
        constants.insert(c);
  for (Operation *op : ops)
    op->erase();
  for (Operation *c : constants)
    if (c->use_empty())
      c->erase();
}

void recordPlacement(ModuleOp module, StringRef key, StringRef value) {
  MLIRContext *ctx = module.getContext();
  NamedAttrList entries;
  if (auto plan = module->getAttrOfType<DictionaryAttr>(
          graph::GraphDialect::kPlacementAttrName))
    entries.append(plan.getValue());
  entries.set(key, StringAttr::get(ctx, value));
  module->setAttr(graph::GraphDialect::kPlacementAttrName,
                  entries.getDictionary(ctx));
}

std::optional<std::string> placementValue(ModuleOp module, StringRef key) {
  auto plan = module->getAttrOfType<DictionaryAttr>(
      graph::GraphDialect::kPlacementAttrName);
  if (!plan)
    return std::nullopt;
  auto value = plan.getAs<StringAttr>(key);
  if (!value)
    return std::nullopt;
  return value.getValue().str();
}

void renumberAllReduceGroups(Block &body) {
  DenseMap<int64_t, int64_t> renumbered;
  for (auto reduce : body.getOps<graph::AllReduceOp>())
    renumbered.try_emplace(reduce.getGroup(), renumbered.size());
  for (auto reduce : body.getOps<graph::AllReduceOp>())
    reduce.setGroup(renumbered.lookup(reduce.getGroup()));
}

std::string formatBytes(double bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof(text), unit ? "%.2f %s" : "%.0f %s", bytes,
                units[unit]);
  return text;
}

void collectForwardOps(Value loss, llvm::DenseSet<Operation *> &forward) {
  SmallVector<Value> work{loss};
  while (!work.empty()) {
    Operation *def = work.pop_back_val().getDefiningOp();
    if (!def || isa<graph::ConstantOp, graph::VariableOp>(def) ||
        !forward.insert(def).second)
      continue;
    llvm::append_range(work, def->getOperands());
  }
}

} // namespace mlir::partc

//===- Attrs.h - Named kernel attributes ----------------------------------===//
//
// Kernels take their parameters as a small map of named values: integer
// lists, float lists or strings. The compiler writes the graph op's attributes
// into the plan under the same names, so new ops need no format change.
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_RUNTIME_KERNELS_ATTRS_H
#define PARTC_RUNTIME_KERNELS_ATTRS_H

#include "runtime/Support.h"

#include <map>
#include <string>
#include <vector>

namespace partc::runtime {

struct AttrValue {
  enum class Kind : uint8_t { Ints = 0, Floats = 1, String = 2 };
  Kind kind = Kind::Ints;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::string str;

  static AttrValue ofInts(std::vector<int64_t> v) {
    AttrValue a;
    a.kind = Kind::Ints;
    a.ints = std::move(v);
    return a;
  }
  static AttrValue ofFloats(std::vector<double> v) {
    AttrValue a;
    a.kind = Kind::Floats;
    a.floats = std::move(v);
    return a;
  }
  static AttrValue ofString(std::string s) {
    AttrValue a;
    a.kind = Kind::String;
    a.str = std::move(s);
    return a;
  }
  bool operator==(const AttrValue &o) const {
    return kind == o.kind && ints == o.ints && floats == o.floats &&
           str == o.str;
  }
};

/// Ordered so that serialization is deterministic.
class AttrMap {
public:
  void set(const std::string &name, AttrValue v) { map_[name] = std::move(v); }
  bool has(const std::string &name) const { return map_.count(name) != 0; }
  void erase(const std::string &name) { map_.erase(name); }
  const std::map<std::string, AttrValue> &entries() const { return map_; }

  /// Attributes every plan carries (their defaults live in the ops'
  /// definitions, never in a kernel): a missing one reads as zero or empty
  /// and is remembered, and createCpuKernel and createGpuKernel then fail
  /// naming it (firstMissing).
  int64_t getInt(const std::string &name) const;
  double getFloat(const std::string &name) const;
  std::string getString(const std::string &name) const;
  const std::string &firstMissing() const { return missing_; }
  void clearMissing() const { missing_.clear(); }

  /// Attributes whose absence means something (unit and optional
  /// attributes: a fused activation, channels_last).
  int64_t getInt(const std::string &name, int64_t dflt) const;
  double getFloat(const std::string &name, double dflt) const;
  /// A required list (it may be empty, as reduction axes may).
  std::vector<int64_t> getInts(const std::string &name) const;
  std::string getString(const std::string &name, const std::string &dflt) const;
  std::vector<double> getFloats(const std::string &name) const;
  /// Attributes without a default in the kernel: their defaults live in the
  /// op's definition, and a plan must carry them.
  Status requireInt(const std::string &name, int64_t &value) const;
  Status requireFloat(const std::string &name, double &value) const;
  Status requireString(const std::string &name, std::string &value) const;
  bool operator==(const AttrMap &o) const { return map_ == o.map_; }

private:
  std::map<std::string, AttrValue> map_;
  /// The first required attribute looked up and not found (kernel creation
  /// on one thread at a time per instruction).
  mutable std::string missing_;
};

/// The `mode` of a pad kernel (the importer admits only these), shared by
/// the CPU and GPU kernels.
enum class PadMode : int { Constant, Reflect, Edge };
inline PadMode padModeOf(const AttrMap &attrs) {
  std::string mode = attrs.getString("mode");
  return mode == "reflect" ? PadMode::Reflect
         : mode == "edge"  ? PadMode::Edge
                           : PadMode::Constant;
}

} // namespace partc::runtime

#endif // PARTC_RUNTIME_KERNELS_ATTRS_H

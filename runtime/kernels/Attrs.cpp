//===- Attrs.cpp ----------------------------------------------------------===//
#include "runtime/kernels/Attrs.h"

namespace partc::runtime {

int64_t AttrMap::getInt(const std::string &name, int64_t dflt) const {
  auto it = map_.find(name);
  if (it == map_.end())
    return dflt;
  const AttrValue &v = it->second;
  if (v.kind == AttrValue::Kind::Ints && !v.ints.empty())
    return v.ints[0];
  if (v.kind == AttrValue::Kind::Floats && !v.floats.empty())
    return static_cast<int64_t>(v.floats[0]);
  return dflt;
}

double AttrMap::getFloat(const std::string &name, double dflt) const {
  auto it = map_.find(name);
  if (it == map_.end())
    return dflt;
  const AttrValue &v = it->second;
  if (v.kind == AttrValue::Kind::Floats && !v.floats.empty())
    return v.floats[0];
  if (v.kind == AttrValue::Kind::Ints && !v.ints.empty())
    return static_cast<double>(v.ints[0]);
  return dflt;
}

std::vector<int64_t> AttrMap::getInts(const std::string &name) const {
  auto it = map_.find(name);
  if (it == map_.end() || it->second.kind != AttrValue::Kind::Ints)
    return {};
  return it->second.ints;
}

std::string AttrMap::getString(const std::string &name,
                               const std::string &dflt) const {
  auto it = map_.find(name);
  if (it == map_.end() || it->second.kind != AttrValue::Kind::String)
    return dflt;
  return it->second.str;
}

} // namespace partc::runtime

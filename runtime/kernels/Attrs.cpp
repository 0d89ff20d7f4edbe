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

int64_t AttrMap::getInt(const std::string &name) const {
  auto it = map_.find(name);
  if (it == map_.end() ||
      (it->second.kind == AttrValue::Kind::Ints     ? it->second.ints.empty()
       : it->second.kind == AttrValue::Kind::Floats ? it->second.floats.empty()
                                                    : true)) {
    if (missing_.empty())
      missing_ = name;
    return 0;
  }
  return getInt(name, 0);
}

double AttrMap::getFloat(const std::string &name) const {
  auto it = map_.find(name);
  if (it == map_.end() || it->second.kind == AttrValue::Kind::String ||
      (it->second.floats.empty() && it->second.ints.empty())) {
    if (missing_.empty())
      missing_ = name;
    return 0;
  }
  return getFloat(name, 0);
}

std::string AttrMap::getString(const std::string &name) const {
  auto it = map_.find(name);
  if (it == map_.end() || it->second.kind != AttrValue::Kind::String) {
    if (missing_.empty())
      missing_ = name;
    return "";
  }
  return it->second.str;
}

std::vector<int64_t> AttrMap::getInts(const std::string &name) const {
  auto it = map_.find(name);
  if (it == map_.end() || it->second.kind != AttrValue::Kind::Ints) {
    if (missing_.empty())
      missing_ = name;
    return {};
  }
  return it->second.ints;
}

std::string AttrMap::getString(const std::string &name,
                               const std::string &dflt) const {
  auto it = map_.find(name);
  if (it == map_.end() || it->second.kind != AttrValue::Kind::String)
    return dflt;
  return it->second.str;
}

std::vector<double> AttrMap::getFloats(const std::string &name) const {
  auto it = map_.find(name);
  if (it == map_.end() || it->second.kind != AttrValue::Kind::Floats)
    return {};
  return it->second.floats;
}

Status AttrMap::requireInt(const std::string &name, int64_t &value) const {
  auto it = map_.find(name);
  if (it == map_.end() || it->second.kind != AttrValue::Kind::Ints ||
      it->second.ints.size() != 1)
    return Status::error("needs the integer attribute '" + name +
                         "' (compile the model again with this partc)");
  value = it->second.ints[0];
  return Status();
}

Status AttrMap::requireFloat(const std::string &name, double &value) const {
  auto it = map_.find(name);
  if (it == map_.end() || it->second.kind != AttrValue::Kind::Floats ||
      it->second.floats.size() != 1)
    return Status::error("needs the float attribute '" + name +
                         "' (compile the model again with this partc)");
  value = it->second.floats[0];
  return Status();
}

Status AttrMap::requireString(const std::string &name,
                              std::string &value) const {
  auto it = map_.find(name);
  if (it == map_.end() || it->second.kind != AttrValue::Kind::String)
    return Status::error("needs the string attribute '" + name +
                         "' (compile the model again with this partc)");
  value = it->second.str;
  return Status();
}

} // namespace partc::runtime

//===- TensorFile.cpp -----------------------------------------------------===//
#include "runtime/io/TensorFile.h"
#include "runtime/io/ProtoWire.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <sys/stat.h>

namespace partc::runtime {

using namespace wire;

namespace {

bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

//===----------------------------------------------------------------------===//
// .npy
//===----------------------------------------------------------------------===//

DType dtypeFromNumpy(const std::string &descr) {
  static const std::pair<const char *, DType> table[] = {
      {"<f4", DType::F32}, {"<f8", DType::F64},  {"<i8", DType::I64},
      {"<i4", DType::I32}, {"<i2", DType::I16},  {"|i1", DType::I8},
      {"|u1", DType::U8},  {"<u2", DType::U16},  {"<u4", DType::U32},
      {"<u8", DType::U64}, {"|b1", DType::Bool}, {"<f2", DType::F16}};
  for (auto &[name, t] : table)
    if (descr == name)
      return t;
  return DType::Invalid;
}

const char *numpyDescr(DType t) {
  switch (t) {
  case DType::F32:
    return "<f4";
  case DType::F64:
    return "<f8";
  case DType::I64:
    return "<i8";
  case DType::I32:
    return "<i4";
  case DType::I16:
    return "<i2";
  case DType::I8:
    return "|i1";
  case DType::U8:
    return "|u1";
  case DType::U16:
    return "<u2";
  case DType::U32:
    return "<u4";
  case DType::U64:
    return "<u8";
  case DType::Bool:
    return "|b1";
  case DType::F16:
    return "<f2";
  default:
    return nullptr;
  }
}

Status parseNpy(const std::vector<uint8_t> &b, const std::string &path,
                HostTensor &t) {
  if (b.size() < 10 || std::memcmp(b.data(), "\x93NUMPY", 6) != 0)
    return Status::error("'" + path + "' is not a .npy file");
  size_t headerLen, start;
  if (b[6] == 1) {
    headerLen = b[8] | (b[9] << 8);
    start = 10;
  } else {
    if (b.size() < 12)
      return Status::error("'" + path + "' is truncated");
    headerLen = b[8] | (b[9] << 8) | (b[10] << 16) | (size_t(b[11]) << 24);
    start = 12;
  }
  if (start + headerLen > b.size())
    return Status::error("'" + path + "' is truncated");
  std::string header(reinterpret_cast<const char *>(b.data() + start),
                     headerLen);
  auto field = [&](const std::string &key) -> std::string {
    size_t k = header.find("'" + key + "'");
    if (k == std::string::npos)
      return {};
    size_t colon = header.find(':', k);
    return colon == std::string::npos ? std::string()
                                      : header.substr(colon + 1);
  };
  std::string descr = field("descr");
  size_t q1 = descr.find('\''), q2 = descr.find('\'', q1 + 1);
  if (q1 == std::string::npos || q2 == std::string::npos)
    return Status::error("'" + path + "' has no dtype");
  t.type.dtype = dtypeFromNumpy(descr.substr(q1 + 1, q2 - q1 - 1));
  if (t.type.dtype == DType::Invalid)
    return Status::error("'" + path + "' has unsupported dtype " +
                         descr.substr(q1 + 1, q2 - q1 - 1));
  if (field("fortran_order").find("True") < field("fortran_order").find(','))
    return Status::error("'" + path + "' is in Fortran order");
  std::string shape = field("shape");
  size_t open = shape.find('('), close = shape.find(')');
  if (open == std::string::npos || close == std::string::npos)
    return Status::error("'" + path + "' has no shape");
  std::stringstream ss(shape.substr(open + 1, close - open - 1));
  std::string item;
  t.type.shape.clear();
  while (std::getline(ss, item, ',')) {
    size_t first = item.find_first_not_of(" \t");
    if (first == std::string::npos)
      continue; // the empty item after a 1-tuple's comma
    char *end = nullptr;
    errno = 0;
    long long d = std::strtoll(item.c_str() + first, &end, 10);
    if (end == item.c_str() + first || errno == ERANGE || d < 0 ||
        item.find_first_not_of(" \t", end - item.c_str()) != std::string::npos)
      return Status::error("'" + path + "' has dimension '" + item +
                           "', which is not a size");
    t.type.shape.push_back(d);
  }
  std::optional<uint64_t> checked = checkedByteSize(t.type);
  if (!checked)
    return Status::error("'" + path + "' declares shape " + t.type.str() +
                         ", over partc's limit of 2^50 bytes for a tensor");
  size_t bytes = *checked, dataStart = start + headerLen;
  if (b.size() - dataStart != bytes)
    return Status::error("'" + path + "' holds " +
                         std::to_string(b.size() - dataStart) +
                         " data bytes, expected " + std::to_string(bytes) +
                         " for " + t.type.str());
  t.data.assign(b.begin() + dataStart, b.end());
  return Status();
}

std::vector<uint8_t> serializeNpy(const HostTensor &t) {
  std::string header = "{'descr': '" + std::string(numpyDescr(t.type.dtype)) +
                       "', 'fortran_order': False, 'shape': (";
  for (int64_t d : t.type.shape)
    header += std::to_string(d) + ", ";
  if (t.type.shape.size() > 1)
    header.erase(header.size() - 1);
  else if (t.type.shape.size() == 1)
    header.erase(header.size() - 1);
  header += "), }";
  while ((10 + header.size() + 1) % 64 != 0)
    header += ' ';
  header += '\n';
  std::vector<uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  out.push_back(header.size() & 0xff);
  out.push_back((header.size() >> 8) & 0xff);
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), t.data.begin(), t.data.end());
  return out;
}

} // namespace

// Devices, pipes and directories are refused before reading: /dev/zero
// never ends.
Status readWholeFile(const std::string &path, uint64_t maxBytes,
                     std::vector<uint8_t> &bytes) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return Status::error("cannot open '" + path + "': " + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    return Status::error("'" + path +
                         "' is not a regular file (a directory, device or "
                         "pipe); give a .npy or .pb tensor file");
  uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size > maxBytes)
    return Status::error("'" + path + "' has " + std::to_string(size) +
                         " bytes, more than the " + std::to_string(maxBytes) +
                         " a tensor of the expected size can take");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::error("cannot open '" + path + "'");
  bytes.resize(size);
  in.read(reinterpret_cast<char *>(bytes.data()),
          static_cast<std::streamsize>(size));
  if (static_cast<uint64_t>(in.gcount()) != size)
    return Status::error("cannot read '" + path + "' whole (" +
                         std::to_string(in.gcount()) + " of " +
                         std::to_string(size) + " bytes)");
  return Status();
}

Status parseTensorProto(const uint8_t *data, size_t size, HostTensor &t) {
  WireReader r{data, data + size};
  std::vector<int64_t> dims, int64Data;
  std::vector<float> floatData;
  std::vector<double> doubleData;
  std::vector<int32_t> int32Data;
  std::vector<uint64_t> uint64Data;
  const uint8_t *raw = nullptr;
  size_t rawLen = 0;
  int64_t dataType = 0;
  bool external = false;
  while (!r.atEnd() && r.ok) {
    uint64_t key = r.varint();
    int field = static_cast<int>(key >> 3), wire = static_cast<int>(key & 7);
    switch (field) {
    case 1:
      readRepeated(r, wire, dims, false);
      break;
    case 2:
      dataType = static_cast<int64_t>(r.varint());
      break;
    case 4:
      readRepeated(r, wire, floatData, true);
      break;
    case 5:
      readRepeated(r, wire, int32Data, false);
      break;
    case 7:
      readRepeated(r, wire, int64Data, false);
      break;
    case 8: {
      const uint8_t *b;
      uint64_t len = r.varint();
      if (r.bytes(len, b))
        t.name.assign(reinterpret_cast<const char *>(b), len);
      break;
    }
    case 9:
      rawLen = r.varint();
      r.bytes(rawLen, raw);
      break;
    case 10:
      readRepeated(r, wire, doubleData, true);
      break;
    case 11:
      readRepeated(r, wire, uint64Data, false);
      break;
    case 14:
      external = r.varint() == 1;
      break;
    default:
      skipField(r, wire);
    }
  }
  if (!r.ok)
    return Status::error("malformed TensorProto");
  if (external)
    return Status::error(
        "TensorProto with external data is not supported here");
  if (dataType < 0 || dataType > 255 || !isValidDType(dataType))
    return Status::error("unsupported TensorProto data type " +
                         std::to_string(dataType));
  t.type.dtype = static_cast<DType>(dataType);
  t.type.shape = dims;
  for (int64_t d : dims)
    if (d < 0)
      return Status::error("negative dimension in TensorProto");
  std::optional<uint64_t> checked = checkedByteSize(t.type);
  if (!checked)
    return Status::error("TensorProto declares shape " + t.type.str() +
                         ", over partc's limit of 2^50 bytes for a tensor");
  // The declared size is compared with the data present before anything is
  // allocated: dims of [2^40, 16] with no data must not allocate 64 TiB.
  size_t bytes = *checked, n = t.type.numElements(),
         es = dtypeSize(t.type.dtype);
  if (raw) {
    if (rawLen != bytes)
      return Status::error("TensorProto raw_data has " +
                           std::to_string(rawLen) + " bytes, expected " +
                           std::to_string(bytes) + " for " + t.type.str());
    t.data.assign(raw, raw + bytes);
    return Status();
  }
  auto fill = [&](auto &vec) -> Status {
    if (vec.size() != n)
      return Status::error("TensorProto has " + std::to_string(vec.size()) +
                           " values, expected " + std::to_string(n) + " for " +
                           t.type.str());
    t.data.assign(bytes, 0);
    for (size_t i = 0; i < n; ++i) {
      auto v = vec[i];
      std::memcpy(t.data.data() + i * es, &v, std::min(es, sizeof(v)));
    }
    return Status();
  };
  switch (t.type.dtype) {
  case DType::F32:
    return fill(floatData);
  case DType::F64:
    return fill(doubleData);
  case DType::I64:
    return fill(int64Data);
  case DType::U32:
  case DType::U64:
    return fill(uint64Data);
  default:
    return fill(int32Data); // i32, i16, i8, u16, u8, bool, f16, bf16
  }
}

std::vector<uint8_t> serializeTensorProto(const HostTensor &t) {
  std::vector<uint8_t> out;
  for (int64_t d : t.type.shape) {
    putVarint(out, (1 << 3) | 0);
    putVarint(out, static_cast<uint64_t>(d));
  }
  putVarint(out, (2 << 3) | 0);
  putVarint(out, static_cast<uint64_t>(t.type.dtype));
  if (!t.name.empty()) {
    putVarint(out, (8 << 3) | 2);
    putVarint(out, t.name.size());
    out.insert(out.end(), t.name.begin(), t.name.end());
  }
  putVarint(out, (9 << 3) | 2);
  putVarint(out, t.data.size());
  out.insert(out.end(), t.data.begin(), t.data.end());
  return out;
}

uint64_t tensorFileLimit(uint64_t tensorBytes) {
  // int64 values in a .pb take up to 10 bytes each as varints; .npy headers
  // are small.
  return 2 * tensorBytes + (1 << 20);
}

Status readTensorFile(const std::string &path, HostTensor &t,
                      uint64_t maxFileBytes) {
  std::vector<uint8_t> bytes;
  PARTC_RETURN_IF_ERROR(readWholeFile(path, maxFileBytes, bytes));
  return parseTensorFile(bytes, path, t);
}

Status parseTensorFile(const std::vector<uint8_t> &bytes,
                       const std::string &path, HostTensor &t) {
  Status s = endsWith(path, ".npy")
                 ? parseNpy(bytes, path, t)
                 : parseTensorProto(bytes.data(), bytes.size(), t)
                       .prepend("'" + path + "'");
  // Kernels read bool as C++ bool, whose only values are 0 and 1; numpy
  // and ONNX treat any other byte as true.
  if (s.ok() && t.type.dtype == DType::Bool)
    for (uint8_t &b : t.data)
      b = b != 0;
  return s;
}

Status writeTensorFile(const std::string &path, const HostTensor &t) {
  std::vector<uint8_t> bytes;
  if (endsWith(path, ".npy")) {
    if (!numpyDescr(t.type.dtype))
      return Status::error("cannot write " + t.type.str() + " as .npy");
    bytes = serializeNpy(t);
  } else {
    bytes = serializeTensorProto(t);
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char *>(bytes.data()), bytes.size());
  if (!out)
    return Status::error("cannot write '" + path + "'");
  return Status();
}

} // namespace partc::runtime

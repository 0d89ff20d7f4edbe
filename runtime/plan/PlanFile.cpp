//===- PlanFile.cpp - Plan file reader and writer -------------------------===//
//
// Layout (little endian):
//   [0, 64)        header: magic, version, header size, file size, metadata
//                  offset and size, weights offset and size, checksum
//   [64, ...)      metadata: a length-prefixed binary encoding of Plan
//   [aligned ...)  weights, at a kWeightAlignment boundary, mapped on load
// The checksum covers the metadata and the weights.
//
//===----------------------------------------------------------------------===//
#include "runtime/plan/Plan.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace partc::runtime {

namespace {

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t headerSize;
  uint64_t fileSize;
  uint64_t metaOffset;
  uint64_t metaSize;
  uint64_t weightsOffset;
  uint64_t weightsSize;
  uint64_t checksum;
};
static_assert(sizeof(Header) == 64, "header layout");

class ByteWriter {
public:
  void u8(uint8_t v) { buf_.push_back(v); }
  void u32(uint32_t v) { raw(&v, 4); }
  void u64(uint64_t v) { raw(&v, 8); }
  void i64(int64_t v) { raw(&v, 8); }
  void f64(double v) { raw(&v, 8); }
  void str(const std::string &s) {
    u64(s.size());
    raw(s.data(), s.size());
  }
  void raw(const void *p, size_t n) {
    const uint8_t *b = static_cast<const uint8_t *>(p);
    buf_.insert(buf_.end(), b, b + n);
  }
  const std::vector<uint8_t> &bytes() const { return buf_; }

private:
  std::vector<uint8_t> buf_;
};

/// Reads with a bounds check on every access; the first failure sticks.
class ByteReader {
public:
  ByteReader(const uint8_t *p, size_t n) : p_(p), n_(n) {}
  bool ok() const { return ok_; }
  size_t position() const { return pos_; }
  uint8_t u8() {
    uint8_t v = 0;
    raw(&v, 1);
    return v;
  }
  uint32_t u32() {
    uint32_t v = 0;
    raw(&v, 4);
    return v;
  }
  uint64_t u64() {
    uint64_t v = 0;
    raw(&v, 8);
    return v;
  }
  int64_t i64() {
    int64_t v = 0;
    raw(&v, 8);
    return v;
  }
  double f64() {
    double v = 0;
    raw(&v, 8);
    return v;
  }
  std::string str() {
    uint64_t len = u64();
    if (!ok_ || len > n_ - pos_) {
      ok_ = false;
      return {};
    }
    std::string s(reinterpret_cast<const char *>(p_ + pos_), len);
    pos_ += len;
    return s;
  }
  /// A count of items that each take at least `minBytes`; rejects counts the
  /// remaining bytes cannot hold, so a corrupt count cannot exhaust memory.
  uint64_t count(size_t minBytes) {
    uint64_t c = u64();
    if (ok_ && minBytes && c > (n_ - pos_) / minBytes)
      ok_ = false;
    return ok_ ? c : 0;
  }

private:
  void raw(void *out, size_t k) {
    if (!ok_ || k > n_ - pos_) {
      ok_ = false;
      return;
    }
    std::memcpy(out, p_ + pos_, k);
    pos_ += k;
  }
  const uint8_t *p_;
  size_t n_, pos_ = 0;
  bool ok_ = true;
};

void writeType(ByteWriter &w, const TensorType &t) {
  w.u8(static_cast<uint8_t>(t.dtype));
  w.u64(t.shape.size());
  for (int64_t d : t.shape)
    w.i64(d);
}

bool readType(ByteReader &r, TensorType &t) {
  uint8_t dt = r.u8();
  if (!isValidDType(dt))
    return false;
  t.dtype = static_cast<DType>(dt);
  uint64_t rank = r.count(8);
  if (rank > 16)
    return false;
  t.shape.resize(rank);
  for (auto &d : t.shape) {
    d = r.i64();
    if (d < 0 || d > (int64_t(1) << 40))
      return false;
  }
  return r.ok() && checkedByteSize(t).has_value();
}

void writeAttrs(ByteWriter &w, const AttrMap &attrs) {
  w.u64(attrs.entries().size());
  for (const auto &[name, v] : attrs.entries()) {
    w.str(name);
    w.u8(static_cast<uint8_t>(v.kind));
    switch (v.kind) {
    case AttrValue::Kind::Ints:
      w.u64(v.ints.size());
      for (int64_t x : v.ints)
        w.i64(x);
      break;
    case AttrValue::Kind::Floats:
      w.u64(v.floats.size());
      for (double x : v.floats)
        w.f64(x);
      break;
    case AttrValue::Kind::String:
      w.str(v.str);
      break;
    }
  }
}

bool readAttrs(ByteReader &r, AttrMap &attrs) {
  uint64_t n = r.count(9);
  for (uint64_t i = 0; i < n && r.ok(); ++i) {
    std::string name = r.str();
    uint8_t kind = r.u8();
    AttrValue v;
    if (kind == 0) {
      uint64_t k = r.count(8);
      for (uint64_t j = 0; j < k; ++j)
        v.ints.push_back(r.i64());
      v.kind = AttrValue::Kind::Ints;
    } else if (kind == 1) {
      uint64_t k = r.count(8);
      for (uint64_t j = 0; j < k; ++j)
        v.floats.push_back(r.f64());
      v.kind = AttrValue::Kind::Floats;
    } else if (kind == 2) {
      v.kind = AttrValue::Kind::String;
      v.str = r.str();
    } else {
      return false;
    }
    attrs.set(name, std::move(v));
  }
  return r.ok();
}

void writeBuffer(ByteWriter &w, const BufferRef &b) {
  w.u8(static_cast<uint8_t>(b.space));
  w.u64(b.offset);
  writeType(w, b.type);
}

bool readBuffer(ByteReader &r, BufferRef &b) {
  uint8_t space = r.u8();
  if (space > static_cast<uint8_t>(MemorySpace::State))
    return false;
  b.space = static_cast<MemorySpace>(space);
  b.offset = r.u64();
  return readType(r, b.type);
}

void writeDecl(ByteWriter &w, const TensorDecl &d) {
  w.str(d.name);
  writeType(w, d.type);
}

bool readDecl(ByteReader &r, TensorDecl &d) {
  d.name = r.str();
  return readType(r, d.type);
}

std::vector<uint8_t> encodeMetadata(const Plan &plan) {
  ByteWriter w;
  w.u64(plan.metadata.size());
  for (const auto &[k, v] : plan.metadata) {
    w.str(k);
    w.str(v);
  }
  w.u64(plan.inputs.size());
  for (const TensorDecl &d : plan.inputs)
    writeDecl(w, d);
  w.u64(plan.outputs.size());
  for (const TensorDecl &d : plan.outputs)
    writeDecl(w, d);
  w.u64(plan.weights.size());
  for (const WeightDecl &d : plan.weights) {
    w.str(d.name);
    writeType(w, d.type);
    w.u64(d.offset);
  }
  w.u64(plan.states.size());
  for (const StateDecl &d : plan.states) {
    w.str(d.name);
    writeType(w, d.type);
    w.u32(d.device);
    w.u64(d.offset);
    w.str(d.role);
    w.u8(d.zeroInit ? 1 : 0);
    w.u64(d.initOffset);
  }
  w.u64(plan.channels.size());
  for (const Channel &c : plan.channels) {
    w.u32(c.srcDevice);
    w.u32(c.dstDevice);
    w.u64(c.bytes);
    w.u8(static_cast<uint8_t>(c.transport));
  }
  w.u64(plan.devices.size());
  for (const DeviceProgram &dev : plan.devices) {
    w.u64(dev.arenaBytes);
    w.u64(dev.stateBytes);
    w.u64(dev.instructions.size());
    for (const Instruction &in : dev.instructions) {
      w.u8(static_cast<uint8_t>(in.op));
      w.str(in.kernel);
      writeAttrs(w, in.attrs);
      w.u64(in.inputs.size());
      for (const BufferRef &b : in.inputs)
        writeBuffer(w, b);
      w.u64(in.outputs.size());
      for (const BufferRef &b : in.outputs)
        writeBuffer(w, b);
      w.str(in.location);
      w.u32(in.index);
      w.u64(in.hostOffset);
      w.i64(in.microBatch);
      w.u8(in.stream);
    }
  }
  return w.bytes();
}

Status decodeMetadata(const uint8_t *p, size_t n, Plan &plan) {
  ByteReader r(p, n);
  auto fail = [&](const char *what) {
    return Status::error(std::string("corrupt plan metadata (") + what +
                         ") near byte " + std::to_string(r.position()));
  };
  uint64_t nmeta = r.count(16);
  for (uint64_t i = 0; i < nmeta && r.ok(); ++i) {
    std::string k = r.str();
    plan.metadata[k] = r.str();
  }
  plan.inputs.resize(r.count(9));
  for (TensorDecl &d : plan.inputs)
    if (!readDecl(r, d))
      return fail("inputs");
  plan.outputs.resize(r.count(9));
  for (TensorDecl &d : plan.outputs)
    if (!readDecl(r, d))
      return fail("outputs");
  plan.weights.resize(r.count(17));
  for (WeightDecl &d : plan.weights) {
    d.name = r.str();
    if (!readType(r, d.type))
      return fail("weights");
    d.offset = r.u64();
  }
  plan.states.resize(r.count(42));
  for (StateDecl &d : plan.states) {
    d.name = r.str();
    if (!readType(r, d.type))
      return fail("state");
    d.device = r.u32();
    d.offset = r.u64();
    d.role = r.str();
    uint8_t zero = r.u8();
    if (zero > 1)
      return fail("state initialization");
    d.zeroInit = zero == 1;
    d.initOffset = r.u64();
  }
  plan.channels.resize(r.count(17));
  for (Channel &c : plan.channels) {
    c.srcDevice = r.u32();
    c.dstDevice = r.u32();
    c.bytes = r.u64();
    uint8_t transport = r.u8();
    if (transport > static_cast<uint8_t>(Transport::Nccl))
      return fail("channel transport");
    c.transport = static_cast<Transport>(transport);
  }
  plan.devices.resize(r.count(24));
  for (DeviceProgram &dev : plan.devices) {
    dev.arenaBytes = r.u64();
    dev.stateBytes = r.u64();
    dev.instructions.resize(r.count(40));
    for (Instruction &in : dev.instructions) {
      uint8_t op = r.u8();
      if (op < 1 || op > static_cast<uint8_t>(OpCode::AllReduce))
        return fail("opcode");
      in.op = static_cast<OpCode>(op);
      in.kernel = r.str();
      if (!readAttrs(r, in.attrs))
        return fail("attributes");
      in.inputs.resize(r.count(17));
      for (BufferRef &b : in.inputs)
        if (!readBuffer(r, b))
          return fail("operand");
      in.outputs.resize(r.count(17));
      for (BufferRef &b : in.outputs)
        if (!readBuffer(r, b))
          return fail("result");
      in.location = r.str();
      in.index = r.u32();
      in.hostOffset = r.u64();
      in.microBatch = static_cast<int32_t>(r.i64());
      in.stream = r.u8();
    }
  }
  if (!r.ok())
    return fail("truncated");
  if (r.position() != n)
    return fail("trailing bytes");
  return Status();
}

} // namespace

const char *opCodeName(OpCode op) {
  switch (op) {
  case OpCode::Kernel:
    return "kernel";
  case OpCode::LoadInput:
    return "load_input";
  case OpCode::StoreOutput:
    return "store_output";
  case OpCode::Send:
    return "send";
  case OpCode::Recv:
    return "recv";
  case OpCode::WaitConsumed:
    return "wait";
  case OpCode::AllReduce:
    return "all_reduce";
  }
  return "?";
}

uint64_t planChecksum(const uint8_t *data, size_t size, uint64_t seed) {
  const uint64_t prime = 0x9E3779B97F4A7C15ull;
  uint64_t h = seed ^ (size * prime);
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t w;
    std::memcpy(&w, data + i, 8);
    h = (h ^ (w * 0xC2B2AE3D27D4EB4Full)) * prime;
    h ^= h >> 29;
  }
  for (; i < size; ++i)
    h = (h ^ data[i]) * prime;
  return h ^ (h >> 32);
}

Status writePlanFile(const std::string &path, const Plan &plan) {
  std::vector<uint8_t> meta = encodeMetadata(plan);
  Header h{};
  std::memcpy(h.magic, kPlanMagic, 8);
  h.version = kPlanFormatVersion;
  h.headerSize = sizeof(Header);
  h.metaOffset = sizeof(Header);
  h.metaSize = meta.size();
  uint64_t end = h.metaOffset + h.metaSize;
  h.weightsOffset =
      (end + kWeightAlignment - 1) / kWeightAlignment * kWeightAlignment;
  h.weightsSize = plan.weightBytes;
  h.fileSize = h.weightsOffset + h.weightsSize;
  h.checksum = planChecksum(plan.weightData, plan.weightBytes,
                            planChecksum(meta.data(), meta.size(), 0));

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out)
    return Status::error("cannot open '" + path +
                         "' for writing: " + std::strerror(errno));
  out.write(reinterpret_cast<const char *>(&h), sizeof(h));
  out.write(reinterpret_cast<const char *>(meta.data()), meta.size());
  std::vector<char> pad(h.weightsOffset - end, 0);
  out.write(pad.data(), pad.size());
  if (plan.weightBytes)
    out.write(reinterpret_cast<const char *>(plan.weightData),
              static_cast<std::streamsize>(plan.weightBytes));
  out.close();
  if (!out)
    return Status::error("failed writing '" + path + "'");
  return Status();
}

Status readPlanFile(const std::string &path, Plan &plan) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0)
    return Status::error("cannot open plan '" + path +
                         "': " + std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::error("'" + path + "' is not a regular file");
  }
  size_t size = static_cast<size_t>(st.st_size);
  if (size < sizeof(Header)) {
    ::close(fd);
    return Status::error("'" + path + "' is not a partc plan: " +
                         std::to_string(size) + " bytes is too short");
  }
  void *map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED)
    return Status::error("cannot map '" + path + "': " + std::strerror(errno));
  std::shared_ptr<const void> storage(
      map, [size](const void *p) { munmap(const_cast<void *>(p), size); });
  return parsePlan(static_cast<const uint8_t *>(map), size, storage, path,
                   plan);
}

Status parsePlan(const uint8_t *base, size_t size,
                 std::shared_ptr<const void> storage, const std::string &path,
                 Plan &plan) {
  if (size < sizeof(Header))
    return Status::error("'" + path + "' is not a partc plan: " +
                         std::to_string(size) + " bytes is too short");
  Header h;
  std::memcpy(&h, base, sizeof(h));
  if (std::memcmp(h.magic, kPlanMagic, 8) != 0)
    return Status::error("'" + path + "' is not a partc plan (bad magic)");
  if (h.version != kPlanFormatVersion)
    return Status::error("'" + path + "' has plan format version " +
                         std::to_string(h.version) + ", this partc-run reads " +
                         std::to_string(kPlanFormatVersion) +
                         "; recompile the model");
  // Each field checked on its own, so that the error names the one that is
  // wrong (a truncated copy differs only in its size).
  auto corrupt = [&](const std::string &what) {
    return Status::error("'" + path + "' is truncated or corrupt: " + what +
                         "; copy the plan again or recompile the model");
  };
  if (h.fileSize != size)
    return corrupt("header says " + std::to_string(h.fileSize) +
                   " bytes, file has " + std::to_string(size));
  if (h.headerSize != sizeof(Header) || h.metaOffset != sizeof(Header))
    return corrupt("header size " + std::to_string(h.headerSize) +
                   " and metadata offset " + std::to_string(h.metaOffset) +
                   " should both be " + std::to_string(sizeof(Header)));
  if (h.metaSize > size - h.metaOffset)
    return corrupt("metadata of " + std::to_string(h.metaSize) +
                   " bytes runs past the end of the file");
  if (h.weightsOffset < h.metaOffset + h.metaSize || h.weightsOffset > size ||
      h.weightsOffset % kWeightAlignment != 0 ||
      h.weightsSize != size - h.weightsOffset)
    return corrupt("weights at offset " + std::to_string(h.weightsOffset) +
                   " of " + std::to_string(h.weightsSize) +
                   " bytes do not end the file at a " +
                   std::to_string(kWeightAlignment) + "-byte boundary");
  uint64_t sum = planChecksum(base + h.weightsOffset, h.weightsSize,
                              planChecksum(base + h.metaOffset, h.metaSize, 0));
  if (sum != h.checksum)
    return Status::error("'" + path + "' is corrupt: checksum mismatch");

  Plan result;
  Status s = decodeMetadata(base + h.metaOffset, h.metaSize, result);
  if (!s.ok())
    return s.prepend("'" + path + "'");
  result.weightData = base + h.weightsOffset;
  result.weightBytes = h.weightsSize;
  result.storage = storage;
  s = verifyPlan(result);
  if (!s.ok())
    return s.prepend("'" + path + "' is invalid");
  plan = std::move(result);
  return Status();
}

} // namespace partc::runtime

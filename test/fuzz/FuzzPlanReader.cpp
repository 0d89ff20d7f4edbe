//===- FuzzPlanReader.cpp - libFuzzer target: plan decoder and verifier ---===//
//
// Input: a plan file. Its size and checksum fields are recomputed first
// (docs/plan-format.md: bytes 16..24 and 56..64), since a mutant with a
// stale checksum would only ever reach the checksum check; the decoder and
// the verifier then see every mutation. A plan that verifies is run on
// the CPU reference when small: the verifier's promise is that a verified
// plan runs without reading or writing out of bounds or hanging.
//
//===----------------------------------------------------------------------===//
#include "runtime/plan/Plan.h"
#include "test/fuzz/FuzzRun.h"

#include <cstdlib>
#include <cstring>
#include <memory>

using namespace partc::runtime;

// The sanitizers' memory limit is below this machine's: run as if on a
// machine of 512 MiB, so that sizes a real machine would accept but the
// fuzzer cannot hold are refused as too large rather than reported as
// out-of-memory.
extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  ::partc::runtime::limitHostMemory(uint64_t(512) << 20);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // Weights are read in place, at kWeightAlignment as when mapped.
  size_t padded =
      (size + kWeightAlignment - 1) / kWeightAlignment * kWeightAlignment;
  std::shared_ptr<uint8_t> copy(
      static_cast<uint8_t *>(std::aligned_alloc(
          kWeightAlignment, padded ? padded : kWeightAlignment)),
      std::free);
  if (size)
    std::memcpy(copy.get(), data, size);
  uint8_t *base = copy.get();
  if (size >= 64) {
    uint64_t fileSize = size, metaOffset, metaSize, weightsOffset;
    std::memcpy(base + 16, &fileSize, 8);
    std::memcpy(&metaOffset, base + 24, 8);
    std::memcpy(&metaSize, base + 32, 8);
    std::memcpy(&weightsOffset, base + 40, 8);
    if (metaOffset <= size && metaSize <= size - metaOffset &&
        weightsOffset <= size) {
      uint64_t sum = planChecksum(base + weightsOffset, size - weightsOffset,
                                  planChecksum(base + metaOffset, metaSize, 0));
      std::memcpy(base + 56, &sum, 8);
    }
  }
  Plan plan;
  if (!parsePlan(base, size, copy, "fuzz.plan", plan).ok())
    return 0;
  partc::fuzz::runSmallPlan(plan);
  return 0;
}

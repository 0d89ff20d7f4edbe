//===- TestData.h - A plan's inputs, and outputs against expected ones ----===//
//
// ONNX's test_data_set_N layout (input_K.pb, output_K.pb): inputs for a run
// from named files, such a directory or seeded random data, and outputs
// compared with the expected ones as numpy.testing.assert_allclose does.
// Shared by partc-run and anything else that runs plans.
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_RUNTIME_IO_TESTDATA_H
#define PARTC_RUNTIME_IO_TESTDATA_H

#include "runtime/io/TensorFile.h"
#include "runtime/plan/Plan.h"

#include <string>
#include <utility>
#include <vector>

namespace partc::runtime {

/// Files named PREFIX_N.pb in `dir`, ordered by N.
std::vector<std::string> numberedFiles(const std::string &dir,
                                       const std::string &prefix);

/// The plan's inputs, in its order: from `files` (input name, file path)
/// first, then from `testDataDir` (by tensor name where the file has one,
/// else by position), and the rest seeded random data. Fails naming the
/// file whose tensor does not have the plan's type, an input named twice
/// or a name the plan lacks.
Status loadInputs(const Plan &plan,
                  const std::vector<std::pair<std::string, std::string>> &files,
                  const std::string &testDataDir, uint64_t seed,
                  std::vector<HostTensor> &inputs);

/// Zero-filled outputs of the plan's types.
std::vector<HostTensor> allocateOutputs(const Plan &plan);

/// Element `i` of `t` as a double.
double elementAsDouble(const HostTensor &t, size_t i);

/// "output 'y' f32[4,8] sum=... values: ..." for a quick look.
std::string describeTensor(const HostTensor &t);

/// Compares `outputs` with `dir`'s output_K.pb; each mismatch, with its
/// worst element, goes to `mismatches`. Fails where the directory does not
/// exist or holds another number of outputs.
Status compareWithTestData(const std::string &dir,
                           const std::vector<HostTensor> &outputs, double rtol,
                           double atol, std::vector<std::string> &mismatches);

/// Writes inputs and outputs as a test_data_set directory.
Status writeTestData(const std::string &dir,
                     const std::vector<HostTensor> &inputs,
                     const std::vector<HostTensor> &outputs);

} // namespace partc::runtime

#endif // PARTC_RUNTIME_IO_TESTDATA_H

//===- LibraryStatus.h - cuBLAS and cuDNN status to Status ------*- C++ -*-===//
//
// Separate from CudaKernels.h so that only the files that call the libraries
// include their headers.
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_RUNTIME_CUDA_LIBRARYSTATUS_H
#define PARTC_RUNTIME_CUDA_LIBRARYSTATUS_H

#include "runtime/Support.h"

#include <cublas_api.h>
#include <cudnn.h>

namespace partc::runtime::cuda {

Status cublasStatus(cublasStatus_t s, const char *what);
Status cudnnStatus(cudnnStatus_t s, const char *what);

} // namespace partc::runtime::cuda

#endif // PARTC_RUNTIME_CUDA_LIBRARYSTATUS_H

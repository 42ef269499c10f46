// cuBLAS and cuBLASLt, loaded at the first call instead of at program start.
//
// Why: loading libcublasLt runs thousands of its static constructors and
// touches ~200 MB (25,000 page faults, ~110 ms of this VM's time) in every
// process that links it, whether it multiplies a matrix or not. `yoco --help`,
// every CPU command and every GPU test that skips without a device paid it:
// about 1,000 yoco processes and 190 GPU-test processes in the plain test
// command. Only the GPU paths call cuBLAS, and they now load it when they do.
//
// Each function the suite calls is defined here with the header's own
// declaration (a parameter list that differs is a compile error: a C function
// cannot be overloaded) and forwards to the library's symbol, found once.
// A function not listed here is an undefined reference at link time.
#include "device/cublas_loader.hpp"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <dlfcn.h>

#include <cstdio>
#include <mutex>
#include <string>

#define YOCO_CUBLAS_STR2(x) #x
#define YOCO_CUBLAS_STR(x) YOCO_CUBLAS_STR2(x)

namespace yoco::cuda {
namespace {

struct Library {
  void* handle = nullptr;
  std::string error;
};

Library open_library(const char* soname) {
  Library lib;
  // The executable's run path first (as its other CUDA libraries are found),
  // then the toolkit this was built against.
  lib.handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (!lib.handle) {
    const std::string first = dlerror();
    const std::string full = std::string(YOCO_CUDA_LIBRARY_DIR) + "/" + soname;
    lib.handle = dlopen(full.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib.handle) lib.error = first + "; " + dlerror();
  }
  return lib;
}

#define YOCO_SONAME(name) "lib" name ".so." YOCO_CUBLAS_STR(CUBLAS_VER_MAJOR)

const Library& cublas_library() {
  static const Library lib = open_library(YOCO_SONAME("cublas"));
  return lib;
}

const Library& cublaslt_library() {
  static const Library lib = open_library(YOCO_SONAME("cublasLt"));
  return lib;
}

// One line on stderr the first time a library or a symbol is missing: the
// caller then sees CUBLAS_STATUS_NOT_INITIALIZED, and its own message says
// which call failed, not why.
void say_once(const std::string& what) {
  static std::once_flag once;
  std::call_once(once, [&] { std::fprintf(stderr, "yoco: cuBLAS is not available: %s\n", what.c_str()); });
}

void* symbol(const Library& lib, const char* name) {
  if (!lib.handle) {
    say_once(lib.error);
    return nullptr;
  }
  void* p = dlsym(lib.handle, name);
  if (!p) say_once(std::string("no symbol ") + name + " in the loaded library");
  return p;
}

}  // namespace
}  // namespace yoco::cuda

// X(library, function, parameters, arguments): every cuBLAS function the suite calls.
#define YOCO_CUBLAS_FUNCTIONS(X)                                                                                    \
  X(cublas_library, cublasCreate, (cublasHandle_t * handle), (handle))                                              \
  X(cublas_library, cublasDestroy, (cublasHandle_t handle), (handle))                                               \
  X(cublas_library, cublasSetStream, (cublasHandle_t handle, cudaStream_t stream), (handle, stream))                \
  X(cublas_library, cublasSetWorkspace, (cublasHandle_t handle, void* workspace, size_t bytes),                     \
    (handle, workspace, bytes))                                                                                     \
  X(cublas_library, cublasSetMathMode, (cublasHandle_t handle, cublasMath_t mode), (handle, mode))                  \
  X(cublas_library, cublasGemmEx,                                                                                   \
    (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,                \
     const void* alpha, const void* A, cudaDataType Atype, int lda, const void* B, cudaDataType Btype, int ldb,     \
     const void* beta, void* C, cudaDataType Ctype, int ldc, cublasComputeType_t computeType,                       \
     cublasGemmAlgo_t algo),                                                                                        \
    (handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc, computeType, algo)) \
  X(cublaslt_library, cublasLtCreate, (cublasLtHandle_t * handle), (handle))                                        \
  X(cublaslt_library, cublasLtDestroy, (cublasLtHandle_t handle), (handle))                                         \
  X(cublaslt_library, cublasLtMatmul,                                                                               \
    (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* A,                          \
     cublasLtMatrixLayout_t Adesc, const void* B, cublasLtMatrixLayout_t Bdesc, const void* beta, const void* C,    \
     cublasLtMatrixLayout_t Cdesc, void* D, cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* algo,         \
     void* workspace, size_t workspaceSizeInBytes, cudaStream_t stream),                                            \
    (handle, desc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo, workspace, workspaceSizeInBytes,      \
     stream))                                                                                                       \
  X(cublaslt_library, cublasLtMatmulDescCreate,                                                                     \
    (cublasLtMatmulDesc_t * desc, cublasComputeType_t computeType, cudaDataType_t scaleType),                       \
    (desc, computeType, scaleType))                                                                                 \
  X(cublaslt_library, cublasLtMatmulDescDestroy, (cublasLtMatmulDesc_t desc), (desc))                               \
  X(cublaslt_library, cublasLtMatmulDescSetAttribute,                                                               \
    (cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const void* buf, size_t bytes),                \
    (desc, attr, buf, bytes))                                                                                       \
  X(cublaslt_library, cublasLtMatrixLayoutCreate,                                                                   \
    (cublasLtMatrixLayout_t * layout, cudaDataType type, uint64_t rows, uint64_t cols, int64_t ld),                 \
    (layout, type, rows, cols, ld))                                                                                 \
  X(cublaslt_library, cublasLtMatrixLayoutDestroy, (cublasLtMatrixLayout_t layout), (layout))                       \
  X(cublaslt_library, cublasLtMatmulPreferenceCreate, (cublasLtMatmulPreference_t * pref), (pref))                  \
  X(cublaslt_library, cublasLtMatmulPreferenceDestroy, (cublasLtMatmulPreference_t pref), (pref))                   \
  X(cublaslt_library, cublasLtMatmulPreferenceSetAttribute,                                                         \
    (cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const void* buf, size_t bytes),    \
    (pref, attr, buf, bytes))                                                                                       \
  X(cublaslt_library, cublasLtMatmulAlgoGetHeuristic,                                                               \
    (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t Adesc,                              \
     cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,                      \
     cublasLtMatmulPreference_t pref, int requested, cublasLtMatmulHeuristicResult_t results[], int* returned),     \
    (handle, desc, Adesc, Bdesc, Cdesc, Ddesc, pref, requested, results, returned))                                 \
  X(cublaslt_library, cublasLtMatmulAlgoCheck,                                                                      \
    (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t Adesc,                              \
     cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,                      \
     const cublasLtMatmulAlgo_t* algo, cublasLtMatmulHeuristicResult_t* result),                                    \
    (handle, desc, Adesc, Bdesc, Cdesc, Ddesc, algo, result))

// `function` is expanded before it is pasted: cublasCreate is cublas_v2.h's
// macro for cublasCreate_v2, the symbol the library exports.
#define YOCO_CUBLAS_FORWARD(library, function, params, args)                                       \
  extern "C" cublasStatus_t CUBLASWINAPI function params {                                         \
    using Fn = cublasStatus_t (*) params;                                                          \
    static const Fn fn =                                                                           \
        reinterpret_cast<Fn>(yoco::cuda::symbol(yoco::cuda::library(), YOCO_CUBLAS_STR(function))); \
    return fn ? fn args : CUBLAS_STATUS_NOT_INITIALIZED;                                           \
  }
YOCO_CUBLAS_FUNCTIONS(YOCO_CUBLAS_FORWARD)

namespace yoco::cuda {

std::vector<std::string> cublas_symbols_missing() {
  std::vector<std::string> missing;
#define YOCO_CUBLAS_PROBE(library, function, params, args)                    \
  if (!library().handle) {                                                    \
    missing.push_back(std::string(YOCO_CUBLAS_STR(function)) + " (" + library().error + ")"); \
  } else if (!dlsym(library().handle, YOCO_CUBLAS_STR(function))) {           \
    missing.push_back(YOCO_CUBLAS_STR(function));                             \
  }
  YOCO_CUBLAS_FUNCTIONS(YOCO_CUBLAS_PROBE)
#undef YOCO_CUBLAS_PROBE
  return missing;
}

int cublas_functions_forwarded() {
  int n = 0;
#define YOCO_CUBLAS_COUNT(library, function, params, args) ++n;
  YOCO_CUBLAS_FUNCTIONS(YOCO_CUBLAS_COUNT)
#undef YOCO_CUBLAS_COUNT
  return n;
}

bool cublas_loaded() {
  // Whether this process has mapped either library yet (RTLD_NOLOAD opens nothing).
  for (const char* soname : {YOCO_SONAME("cublas"), YOCO_SONAME("cublasLt")}) {
    if (void* h = dlopen(soname, RTLD_NOW | RTLD_NOLOAD)) {
      dlclose(h);
      return true;
    }
  }
  return false;
}

}  // namespace yoco::cuda

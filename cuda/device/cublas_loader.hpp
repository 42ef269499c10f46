// cuBLAS and cuBLASLt are loaded at their first call (cublas_loader.cpp says
// why); these say what the loader found, for its tests.
#pragma once

#include <string>
#include <vector>

namespace yoco::cuda {

// The functions the loader forwards that the libraries lack, each with the
// reason (a library that cannot be opened names its error): empty when all
// are there. Opens the libraries.
std::vector<std::string> cublas_symbols_missing();
// How many cuBLAS functions the loader forwards.
int cublas_functions_forwarded();
// Whether cuBLAS or cuBLASLt is mapped into this process yet.
bool cublas_loaded();

}  // namespace yoco::cuda

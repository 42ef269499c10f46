#pragma once
// Functions shared by host and device code: __host__ __device__ under nvcc,
// plain functions under g++, so CPU tests can include the same headers.
#if defined(__CUDACC__)
#define YOCO_HD __host__ __device__
#else
#define YOCO_HD
#endif

#pragma once
// Storage types of tensor files and their conversions. bf16 rounding is
// round-to-nearest-even, as torch.Tensor.to(torch.bfloat16) does. The integer
// types are for index tensors (cu_seqlens); weights are floating-point only.
#include <cstdint>
#include <cstring>
#include <string>

namespace yoco {

enum class DType { f64, f32, bf16, f16, i64, i32 };

inline int dtype_size(DType t) {
  switch (t) {
    case DType::f64:
    case DType::i64: return 8;
    case DType::f32:
    case DType::i32: return 4;
    case DType::bf16:
    case DType::f16: return 2;
  }
  return 0;
}

inline bool dtype_is_float(DType t) { return t != DType::i64 && t != DType::i32; }

// safetensors spelling: F64, F32, BF16, F16, I64, I32.
std::string dtype_safetensors_name(DType t);
bool dtype_from_safetensors_name(const std::string& s, DType* out);

inline float bf16_bits_to_float(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t float_to_bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float round_to_bf16(float f) { return bf16_bits_to_float(float_to_bf16_bits(f)); }

float f16_bits_to_float(uint16_t h);
uint16_t float_to_f16_bits(float f);

// One element in storage: dtype_size(t) bytes at p, little-endian, from or to
// a double (floats round to nearest even; integers must be exact, as index
// tensors are). The one codec of the safetensors reader and writers.
double decode_value(DType t, const unsigned char* p);
void encode_value(DType t, double x, unsigned char* p);

}  // namespace yoco

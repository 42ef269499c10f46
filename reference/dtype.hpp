#pragma once
// Storage types of weight files and their conversions. bf16 rounding is
// round-to-nearest-even, as torch.Tensor.to(torch.bfloat16) does.
#include <cstdint>
#include <cstring>
#include <string>

namespace yoco {

enum class DType { f64, f32, bf16, f16 };

inline int dtype_size(DType t) {
  switch (t) {
    case DType::f64: return 8;
    case DType::f32: return 4;
    case DType::bf16:
    case DType::f16: return 2;
  }
  return 0;
}

// safetensors spelling: F64, F32, BF16, F16.
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

}  // namespace yoco

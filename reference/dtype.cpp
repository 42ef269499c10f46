#include "dtype.hpp"

#include <cmath>
#include <cstring>

namespace yoco {

std::string dtype_safetensors_name(DType t) {
  switch (t) {
    case DType::f64: return "F64";
    case DType::f32: return "F32";
    case DType::bf16: return "BF16";
    case DType::f16: return "F16";
    case DType::i64: return "I64";
    case DType::i32: return "I32";
  }
  return "?";
}

bool dtype_from_safetensors_name(const std::string& s, DType* out) {
  if (s == "F64") *out = DType::f64;
  else if (s == "F32") *out = DType::f32;
  else if (s == "BF16") *out = DType::bf16;
  else if (s == "F16") *out = DType::f16;
  else if (s == "I64") *out = DType::i64;
  else if (s == "I32") *out = DType::i32;
  else return false;
  return true;
}

float f16_bits_to_float(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1u, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  float mag;
  if (exp == 0) mag = std::ldexp(static_cast<float>(man), -24);  // zero or subnormal
  else if (exp == 31) mag = man ? NAN : INFINITY;
  else mag = std::ldexp(static_cast<float>(man | 0x400u), static_cast<int>(exp) - 25);
  return sign ? -mag : mag;
}

uint16_t float_to_f16_bits(float f) {
  // Via double and nearbyint: exact round-to-nearest-even for every finite input.
  const uint16_t sign = std::signbit(f) ? 0x8000u : 0u;
  const double a = std::fabs(static_cast<double>(f));
  if (std::isnan(f)) return sign | 0x7e00u;
  if (a >= 65520.0) return sign | 0x7c00u;  // overflows to inf
  if (a < std::ldexp(1.0, -14)) {           // subnormal range: units of 2^-24
    return sign | static_cast<uint16_t>(std::nearbyint(a * std::ldexp(1.0, 24)));
  }
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  const double unit = std::ldexp(1.0, e - 11);
  uint32_t q = static_cast<uint32_t>(std::nearbyint(a / unit));  // 10..11 bits + carry
  int exp = e - 1 + 15;
  if (q == 2048) {
    q = 1024;
    ++exp;
  }
  if (exp >= 31) return sign | 0x7c00u;
  return sign | static_cast<uint16_t>((exp << 10) | (q & 0x3ffu));
}

double decode_value(DType t, const unsigned char* p) {
  switch (t) {
    case DType::f64: {
      double x;
      std::memcpy(&x, p, 8);
      return x;
    }
    case DType::f32: {
      float x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case DType::bf16:
    case DType::f16: {
      uint16_t b;
      std::memcpy(&b, p, 2);
      return t == DType::bf16 ? bf16_bits_to_float(b) : f16_bits_to_float(b);
    }
    case DType::i64: {
      int64_t x;
      std::memcpy(&x, p, 8);
      return static_cast<double>(x);
    }
    case DType::i32: {
      int32_t x;
      std::memcpy(&x, p, 4);
      return x;
    }
  }
  return 0;
}

void encode_value(DType t, double x, unsigned char* p) {
  switch (t) {
    case DType::f64: std::memcpy(p, &x, 8); return;
    case DType::f32: {
      const float f = static_cast<float>(x);
      std::memcpy(p, &f, 4);
      return;
    }
    case DType::bf16:
    case DType::f16: {
      const float f = static_cast<float>(x);
      const uint16_t b = t == DType::bf16 ? float_to_bf16_bits(f) : float_to_f16_bits(f);
      std::memcpy(p, &b, 2);
      return;
    }
    case DType::i64: {
      const auto i = static_cast<int64_t>(x);
      std::memcpy(p, &i, 8);
      return;
    }
    case DType::i32: {
      const auto i = static_cast<int32_t>(x);
      std::memcpy(p, &i, 4);
      return;
    }
  }
}

}  // namespace yoco

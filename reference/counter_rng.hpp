#pragma once
// Counter-based initialisation: the value of element i of tensor `name` is a
// pure function of (seed, name, i), so a CUDA kernel can regenerate exactly the
// same tensor on the device, in any order and in parallel, without a copy.
// Plain C++ (integer ops and one float multiply): identical on host and device.
#include <cstdint>
#include <string_view>

#if defined(__CUDACC__)
#define YOCO_HOST_DEVICE __host__ __device__
#else
#define YOCO_HOST_DEVICE
#endif

namespace yoco {

YOCO_HOST_DEVICE inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

constexpr uint64_t fnv1a64(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

// One key per (seed, tensor): the tensor's stream.
inline uint64_t tensor_stream_key(uint64_t seed, std::string_view name) {
  return splitmix64(seed ^ splitmix64(fnv1a64(name)));
}

// Uniform on [-1, 1) with 24 random bits: k * 2^-23 - 1 is exact in float.
YOCO_HOST_DEVICE inline float counter_uniform_pm1(uint64_t key, uint64_t index) {
  const uint64_t h = splitmix64(key + (index + 1) * 0x9E3779B97F4A7C15ull);
  const float k = static_cast<float>(static_cast<uint32_t>(h >> 40));
  return k * 0x1p-23f - 1.0f;
}

// How a tensor's elements are drawn from the uniform u in [-1, 1):
//   value = offset + scale * u   (offset is 0 or 1; 1 for norm weights)
struct InitRule {
  float offset = 0.0f;
  float scale = 1.0f;
};

YOCO_HOST_DEVICE inline float counter_init_value(uint64_t key, uint64_t index, InitRule rule) {
  const float u = counter_uniform_pm1(key, index);
  // scale * u is exact for the power-of-two scales of norm weights, so fused or
  // unfused evaluation gives the same float on host and device.
  return rule.offset + rule.scale * u;
}

}  // namespace yoco

// Device weights (device_weights.hpp): buffers from the arena's `weights`
// category, filled on the device from the seed or uploaded from a file that
// passed the CPU loader's checks.
#include "device/device_weights.hpp"

#include <algorithm>
#include <memory>
#include <set>
#include <stdexcept>
#include <vector>

#include "counter_rng.hpp"
#include "dtype.hpp"
#include "param_layout.hpp"
#include "safetensors.hpp"
#include "weights.hpp"

namespace yoco::cuda {
namespace {

void check_cuda(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) throw std::runtime_error("device weights: " + what + ": " + cudaGetErrorString(e));
}

std::string group_label(const std::vector<std::string>& names) {
  std::string s = "weights: " + names.front();
  if (names.size() > 1) s += " (+" + std::to_string(names.size() - 1) + " fused)";
  return s;
}

}  // namespace

std::string CudaWeightSource::describe() const {
  return path.empty() ? "seed " + std::to_string(seed) : "file " + path;
}

DeviceWeights DeviceWeights::create(DeviceArena& arena, const ModelConfig& cfg, const CudaWeightSource& source,
                                    const std::vector<std::vector<std::string>>& groups, cudaStream_t stream) {
  const std::vector<ParamSpec> specs = param_layout(cfg);
  std::map<std::string, const ParamSpec*> by_name;
  for (const auto& p : specs) by_name.emplace(p.name, &p);

  // Groups come from runner code: a bad one is a bug, not user input.
  std::set<std::string> grouped;
  for (const auto& g : groups) {
    for (const auto& name : g) {
      if (!by_name.count(name))
        throw std::logic_error("device weights: fused group names '" + name + "', not a parameter of " + cfg.name);
      if (!grouped.insert(name).second)
        throw std::logic_error("device weights: parameter '" + name + "' is in more than one fused group (or twice in one)");
      // Stacked along `out`, the members must share `in` (a 2-D [out, in] each).
      const ParamSpec& first = *by_name.at(g.front());
      const ParamSpec& p = *by_name.at(name);
      if (p.shape.size() != 2 || first.shape.size() != 2 || p.shape[1] != first.shape[1])
        throw std::logic_error("device weights: fused group mixes '" + g.front() + "' " + shape_string(first.shape) +
                               " and '" + name + "' " + shape_string(p.shape) + " (members must be [out, in] with one in)");
    }
  }

  // A file is opened and its layout checked (names, shapes, dtypes) before any device memory is taken;
  // its values are checked finite as each tensor is read, after the buffers exist, which an error
  // frees as it unwinds.
  std::unique_ptr<SafetensorsReader> file;
  if (!source.path.empty()) {
    file = std::make_unique<SafetensorsReader>(source.path);
    check_weights_file(*file, cfg);
  }

  DeviceWeights w;
  for (const auto& g : groups) {
    if (g.empty()) continue;
    int64_t total = 0;
    for (const auto& name : g) total += by_name.at(name)->numel();
    const size_t b = w.buffers_.size();
    w.buffers_.push_back(arena.require(MemCategory::weights, total * static_cast<int64_t>(sizeof(__nv_bfloat16)),
                                       group_label(g)));
    int64_t offset = 0;
    for (const auto& name : g) {
      const int64_t n = by_name.at(name)->numel();
      w.where_[name] = Place{b, offset, n};
      offset += n;
    }
  }
  for (const auto& p : specs) {
    if (grouped.count(p.name)) continue;
    const size_t b = w.buffers_.size();
    w.buffers_.push_back(
        arena.require(MemCategory::weights, p.numel() * static_cast<int64_t>(sizeof(__nv_bfloat16)), "weights: " + p.name));
    w.where_[p.name] = Place{b, 0, p.numel()};
  }

  auto dst_of = [&](const std::string& name) {
    const Place& pl = w.where_.at(name);
    return w.buffers_[pl.buffer].as<__nv_bfloat16>() + pl.offset;
  };

  if (!file) {
    for (const auto& p : specs) {
      check_cuda(launch_counter_init_bf16(dst_of(p.name), p.numel(), tensor_stream_key(source.seed, p.name), p.init, stream),
                 "generating tensor '" + p.name + "' from seed " + std::to_string(source.seed));
    }
  } else {
    // One tensor at a time through host staging sized for the largest one.
    int64_t largest = 0;
    for (const auto& p : specs) largest = std::max(largest, p.numel());
    std::vector<float> values(static_cast<size_t>(largest));
    std::vector<uint16_t> bits(static_cast<size_t>(largest));
    for (const auto& p : specs) {
      const int64_t n = p.numel();
      read_weight_tensor(*file, p.name, values.data());
      for (int64_t i = 0; i < n; ++i) bits[static_cast<size_t>(i)] = float_to_bf16_bits(values[static_cast<size_t>(i)]);
      const std::string what = "uploading tensor '" + p.name + "' from " + source.path;
      check_cuda(cudaMemcpyAsync(dst_of(p.name), bits.data(), static_cast<size_t>(n) * sizeof(uint16_t),
                                 cudaMemcpyHostToDevice, stream),
                 what);
      check_cuda(cudaStreamSynchronize(stream), what);  // before `bits` is reused
    }
  }
  check_cuda(cudaStreamSynchronize(stream), "weights from " + source.describe());
  return w;
}

const __nv_bfloat16* DeviceWeights::operator[](const std::string& name) const {
  const auto it = where_.find(name);
  if (it == where_.end()) throw std::logic_error("device weights: no parameter '" + name + "'");
  return buffers_[it->second.buffer].as<__nv_bfloat16>() + it->second.offset;
}

int64_t DeviceWeights::numel(const std::string& name) const {
  const auto it = where_.find(name);
  if (it == where_.end()) throw std::logic_error("device weights: no parameter '" + name + "'");
  return it->second.numel;
}

int64_t DeviceWeights::bytes() const {
  int64_t b = 0;
  for (const auto& buf : buffers_) b += buf.bytes();
  return b;
}

}  // namespace yoco::cuda

#pragma once
// A model's parameters on the CPU, by name, in the layout of param_layout().
// 1-D tensors (norm weights) are stored as 1 x n matrices.
#include <cstdint>
#include <map>
#include <string>

#include "config.hpp"
#include "dtype.hpp"
#include "param_layout.hpp"
#include "tensor.hpp"

namespace yoco {

template <class T>
class Weights {
 public:
  // Deterministic: element i of tensor `name` depends only on (seed, name, i).
  static Weights init(const ModelConfig& cfg, uint64_t seed);
  // Missing, extra or mis-shaped tensors are InputErrors naming the tensor.
  static Weights load(const ModelConfig& cfg, const std::string& path);
  void save(const std::string& path, DType dtype) const;

  const Mat<T>& operator[](const std::string& name) const;
  Mat<T>& mutable_tensor(const std::string& name);
  // A norm weight as a row vector view.
  Eigen::Map<const RowVec<T>> row(const std::string& name) const {
    const auto& m = (*this)[name];
    return Eigen::Map<const RowVec<T>>(m.data(), m.size());
  }
  int64_t bytes() const;
  const ModelConfig& config() const { return cfg_; }

 private:
  ModelConfig cfg_;
  std::map<std::string, Mat<T>> tensors_;
};

// Shape of a spec as a matrix: [out, in] or 1 x n.
inline std::pair<int64_t, int64_t> matrix_shape(const ParamSpec& p) {
  if (p.shape.size() == 1) return {1, p.shape[0]};
  return {p.shape[0], p.shape[1]};
}

class SafetensorsReader;

// The layout checks of a weights file against `cfg` (no extra tensor, none
// missing, every shape right), as InputErrors naming the file and the tensor:
// the one definition both Weights<T>::load and the CUDA loader use.
void check_weights_file(const SafetensorsReader& file, const ModelConfig& cfg);

// Tensor `name` of a checked weights file into `dst` (its numel values), for the CPU and the GPU loaders
// alike: InputError naming the file, tensor and element at a value that is not finite (a NaN weight made
// every output NaN and the greedy tokens arbitrary, with no word; yoco check reads outputs with another
// reader, which counts non-finite values instead).
template <class T>
void read_weight_tensor(const SafetensorsReader& file, const std::string& name, T* dst);

// The counter-based initial weights of `cfg` written as a safetensors file,
// one tensor at a time: the same bytes as Weights<float>::init(cfg, seed).save
// with a tensor's floats in memory, not the model's (yoco-13b: 26 GB in bf16
// needed 85 GB of memory).
void save_initial_weights(const ModelConfig& cfg, uint64_t seed, const std::string& path, DType dtype);

// check_weights_file, then every tensor read and checked finite one at a time
// (`weights inspect --model`: the largest tensor's floats in memory, not the model's).
void check_weights_file_values(const ModelConfig& cfg, const std::string& path);

// The largest tensor of cfg's layout, in elements.
int64_t largest_tensor_elements(const ModelConfig& cfg);

// Fills `dst` (p.numel() elements) with the counter-based values of tensor p.
template <class T>
void fill_counter_init(const ParamSpec& p, uint64_t seed, T* dst);

extern template class Weights<float>;
extern template class Weights<double>;

}  // namespace yoco

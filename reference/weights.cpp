#include "weights.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "errors.hpp"
#include "safetensors.hpp"

namespace yoco {

template <class T>
void fill_counter_init(const ParamSpec& p, uint64_t seed, T* dst) {
  const uint64_t key = tensor_stream_key(seed, p.name);
  const int64_t n = p.numel();
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<T>(counter_init_value(key, static_cast<uint64_t>(i), p.init));
}

template <class T>
Weights<T> Weights<T>::init(const ModelConfig& cfg, uint64_t seed) {
  Weights w;
  w.cfg_ = cfg;
  for (const auto& p : param_layout(cfg)) {
    const auto [r, c] = matrix_shape(p);
    Mat<T> m(r, c);
    fill_counter_init(p, seed, m.data());
    w.tensors_.emplace(p.name, std::move(m));
  }
  return w;
}

void check_weights_file(const SafetensorsReader& file, const ModelConfig& cfg) {
  const std::string& path = file.path();
  const auto specs = param_layout(cfg);
  std::set<std::string> expected;
  for (const auto& p : specs) expected.insert(p.name);
  std::vector<std::string> names;
  for (const auto& [name, e] : file.entries()) names.push_back(name);
  for (const auto& [name, e] : file.others()) names.push_back(name);
  std::sort(names.begin(), names.end());
  for (const auto& name : names) {
    if (!expected.count(name))
      throw InputError(path + ": unexpected tensor '" + name + "' for model " + cfg.name + " (extra tensor)");
  }
  for (const auto& p : specs) {
    if (const auto other = file.others().find(p.name); other != file.others().end())
      throw InputError(path + ": tensor '" + p.name + "' is " + other->second.dtype +
                       "; weights must be F64, F32, BF16 or F16");
    const auto it = file.entries().find(p.name);
    if (it == file.entries().end())
      throw InputError(path + ": missing tensor '" + p.name + "' (shape " + shape_string(p.shape) + ") for model " + cfg.name);
    if (!dtype_is_float(it->second.dtype))
      throw InputError(path + ": tensor '" + p.name + "' is " + dtype_safetensors_name(it->second.dtype) +
                       "; weights must be F64, F32, BF16 or F16");
    if (it->second.shape != p.shape)
      throw InputError(path + ": tensor '" + p.name + "' has shape " + shape_string(it->second.shape) + ", model " +
                       cfg.name + " needs " + shape_string(p.shape));
  }
  // The tensors fit, but a file `weights init` wrote for another config (another rope_theta, norm_eps,
  // window or head split: the same shapes) would give other logits without a word. Files without the
  // key (written elsewhere) are taken on their tensors alone.
  const auto meta = file.metadata().find("yoco_config");
  if (meta == file.metadata().end()) return;
  const ModelConfig written = config_from_json_text(meta->second, path + ": metadata yoco_config");
  if (const auto diff = config_difference(written, cfg))
    throw InputError(path + ": written for another model config: " + *diff + " (the file's yoco_config vs model " +
                     cfg.name + ")");
}

template <class T>
void read_weight_tensor(const SafetensorsReader& file, const std::string& name, T* dst) {
  file.read<T>(name, dst);
  const int64_t n = file.entries().at(name).numel();
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(dst[i]))
      throw InputError(file.path() + ": tensor '" + name + "' element " + std::to_string(i) + " is " +
                       (std::isnan(dst[i]) ? "NaN" : "infinite") + ": weights must be finite");
}

template <class T>
Weights<T> Weights<T>::load(const ModelConfig& cfg, const std::string& path) {
  SafetensorsReader file(path);
  check_weights_file(file, cfg);
  Weights w;
  w.cfg_ = cfg;
  for (const auto& p : param_layout(cfg)) {
    const auto [r, c] = matrix_shape(p);
    Mat<T> m(r, c);
    read_weight_tensor(file, p.name, m.data());
    w.tensors_.emplace(p.name, std::move(m));
  }
  return w;
}

namespace {
std::map<std::string, std::string> weights_metadata(const ModelConfig& cfg) {
  return {{"format", "pt"}, {"yoco_config", config_to_json_text(cfg)}};
}
}  // namespace

int64_t largest_tensor_elements(const ModelConfig& cfg) {
  int64_t n = 0;
  for (const auto& p : param_layout(cfg)) n = std::max(n, p.numel());
  return n;
}

void save_initial_weights(const ModelConfig& cfg, uint64_t seed, const std::string& path, DType dtype) {
  const auto layout = param_layout(cfg);
  std::vector<SafetensorsWriter::Spec> specs;
  for (const auto& p : layout) specs.push_back({p.name, dtype, p.shape});
  SafetensorsWriter out(path, specs, weights_metadata(cfg));
  std::vector<float> buf;
  for (const auto& p : layout) {
    buf.resize(static_cast<size_t>(p.numel()));
    fill_counter_init(p, seed, buf.data());
    out.append(buf.data(), p.numel());
  }
  out.commit();
}

void check_weights_file_values(const ModelConfig& cfg, const std::string& path) {
  const SafetensorsReader file(path);
  check_weights_file(file, cfg);
  std::vector<float> buf;
  for (const auto& p : param_layout(cfg)) {
    buf.resize(static_cast<size_t>(p.numel()));
    read_weight_tensor(file, p.name, buf.data());
  }
}

template <class T>
void Weights<T>::save(const std::string& path, DType dtype) const {
  std::vector<TensorToWrite> out;
  for (const auto& p : param_layout(cfg_)) {
    TensorToWrite t;
    t.name = p.name;
    t.shape = p.shape;
    if constexpr (std::is_same_v<T, double>) t.data64 = tensors_.at(p.name).data();
    else t.data32 = tensors_.at(p.name).data();
    out.push_back(t);
  }
  write_safetensors(path, out, dtype, weights_metadata(cfg_));
}

template <class T>
const Mat<T>& Weights<T>::operator[](const std::string& name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) throw std::logic_error("no parameter '" + name + "' in " + cfg_.name);
  return it->second;
}

template <class T>
Mat<T>& Weights<T>::mutable_tensor(const std::string& name) {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) throw std::logic_error("no parameter '" + name + "' in " + cfg_.name);
  return it->second;
}

template <class T>
int64_t Weights<T>::bytes() const {
  int64_t b = 0;
  for (const auto& [n, m] : tensors_) b += m.size() * static_cast<int64_t>(sizeof(T));
  return b;
}

template void read_weight_tensor<float>(const SafetensorsReader&, const std::string&, float*);
template void read_weight_tensor<double>(const SafetensorsReader&, const std::string&, double*);
template class Weights<float>;
template class Weights<double>;
template void fill_counter_init<float>(const ParamSpec&, uint64_t, float*);
template void fill_counter_init<double>(const ParamSpec&, uint64_t, double*);

}  // namespace yoco

// Device weights in bf16: from the seed and from a file they are bit for bit
// bf16(Weights<float>), fused groups sit back to back in the order given, a
// bad file fails with the CPU loader's very message (and takes no device
// memory), and the arena counts exactly the weights.
#include "device/device_weights.hpp"

#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "config.hpp"
#include "dtype.hpp"
#include "errors.hpp"
#include "gpu_test_support.hpp"
#include "param_layout.hpp"
#include "weights.hpp"

namespace yoco::cuda {
namespace {

namespace fs = std::filesystem;
using Groups = std::vector<std::vector<std::string>>;

const char* const kConfigs[] = {"yoco-tiny", "yoco-swa-tiny", "transformer-tiny"};

// Fused groups as a runner would ask for them: QKV(G) of the first self layer
// (first layer for the Transformer), the FFN input pair, and for YOCO the
// cross-decoder's shared K/V projection.
Groups groups_for(const ModelConfig& cfg) {
  if (!cfg.is_yoco())
    return {{"layers.0.attention.wq.weight", "layers.0.attention.wk.weight", "layers.0.attention.wv.weight"},
            {"layers.1.feed_forward.w1.weight", "layers.1.feed_forward.w3.weight"}};
  const std::string p = "self_decoder.layers.0.";
  std::vector<std::string> qkvg = {p + "mixer.q_proj.weight", p + "mixer.k_proj.weight", p + "mixer.v_proj.weight"};
  if (cfg.self_decoder() == SelfDecoderKind::gret) qkvg.push_back(p + "mixer.g_proj.weight");
  return {qkvg,
          {p + "ffn.fc1.weight", p + "ffn.gate.weight"},
          {"cross_decoder.k_proj.weight", "cross_decoder.v_proj.weight"}};
}

std::string temp_dir() {
  const fs::path d = fs::temp_directory_path() / ("yoco_test_device_weights_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d.string();
}

std::vector<uint16_t> download_bits(const DeviceWeights& w, const std::string& name) {
  std::vector<uint16_t> bits(static_cast<size_t>(w.numel(name)));
  EXPECT_EQ(cudaMemcpy(bits.data(), w[name], bits.size() * sizeof(uint16_t), cudaMemcpyDeviceToHost), cudaSuccess)
      << name;
  return bits;
}

// Every tensor on the device equals bf16(want) element by element, bitwise.
template <class T>
void expect_same_bits(const DeviceWeights& w, const ModelConfig& cfg, const Weights<T>& want, const std::string& ctx) {
  const auto specs = param_layout(cfg);
  ASSERT_EQ(w.tensor_count(), specs.size()) << ctx;
  for (const auto& p : specs) {
    ASSERT_EQ(w.numel(p.name), p.numel()) << ctx << " " << p.name;
    const auto got = download_bits(w, p.name);
    const auto& m = want[p.name];
    ASSERT_EQ(static_cast<int64_t>(m.size()), p.numel()) << ctx << " " << p.name;
    int64_t mismatches = 0, first = -1;
    for (int64_t i = 0; i < p.numel(); ++i) {
      if (got[static_cast<size_t>(i)] != float_to_bf16_bits(static_cast<float>(m.data()[i]))) {
        if (first < 0) first = i;
        ++mismatches;
      }
    }
    EXPECT_EQ(mismatches, 0) << ctx << " " << p.name << ": first mismatch at element " << first;
  }
}

void expect_groups_contiguous(const DeviceWeights& w, const Groups& groups, const std::string& ctx) {
  for (const auto& g : groups) {
    for (size_t j = 1; j < g.size(); ++j)
      EXPECT_EQ(w[g[j]], w[g[j - 1]] + w.numel(g[j - 1])) << ctx << ": " << g[j] << " does not follow " << g[j - 1];
  }
}

struct Stream {
  cudaStream_t s = nullptr;
  Stream() { EXPECT_EQ(cudaStreamCreate(&s), cudaSuccess); }
  ~Stream() { cudaStreamDestroy(s); }
};

TEST(DeviceWeights, SeedIsBf16OfTheReferenceInit) {
  YOCO_REQUIRE_GPU();
  auto backend = cuda_backend();
  DeviceArena arena(*backend);
  Stream stream;
  const uint64_t seed = 20240511;
  for (const char* name : kConfigs) {
    const auto cfg = preset_config(name);
    const auto groups = groups_for(cfg);
    {
      const auto w = DeviceWeights::create(arena, cfg, CudaWeightSource{"", seed}, groups, stream.s);
      expect_same_bits(w, cfg, Weights<float>::init(cfg, seed), name);
      expect_groups_contiguous(w, groups, name);
      EXPECT_EQ(w.bytes(), 2 * param_count(cfg)) << name;
      EXPECT_EQ(arena.report().at(MemCategory::weights), w.bytes()) << name;
      // One buffer per group plus one per other tensor.
      size_t grouped = 0;
      for (const auto& g : groups) grouped += g.size();
      EXPECT_EQ(arena.live_buffers(), static_cast<int>(w.tensor_count() - grouped + groups.size())) << name;
    }
    EXPECT_EQ(arena.report().at(MemCategory::weights), 0) << name << ": buffers freed with the weights";
  }
  // Without groups every tensor stands alone, with the same values; another
  // seed gives other values.
  const auto cfg = preset_config("yoco-tiny");
  const auto w = DeviceWeights::create(arena, cfg, CudaWeightSource{"", seed}, {}, stream.s);
  expect_same_bits(w, cfg, Weights<float>::init(cfg, seed), "yoco-tiny ungrouped");
  EXPECT_EQ(arena.live_buffers(), static_cast<int>(w.tensor_count()));
  const auto w2 = DeviceWeights::create(arena, cfg, CudaWeightSource{"", seed + 1}, {}, stream.s);
  EXPECT_NE(download_bits(w, "output_projection.weight"), download_bits(w2, "output_projection.weight"));
  EXPECT_EQ(CudaWeightSource({"", 7}).describe(), "seed 7");
  EXPECT_EQ(CudaWeightSource({"w.safetensors", 7}).describe(), "file w.safetensors");
}

TEST(DeviceWeights, FileLoadsTheSameBits) {
  YOCO_REQUIRE_GPU();
  auto backend = cuda_backend();
  DeviceArena arena(*backend);
  Stream stream;
  const std::string dir = temp_dir();
  const uint64_t seed = 77;
  for (const char* name : kConfigs) {
    const auto cfg = preset_config(name);
    const auto groups = groups_for(cfg);
    const auto ref = Weights<float>::init(cfg, seed);
    for (const DType dt : {DType::f32, DType::bf16, DType::f16}) {
      const std::string ctx = std::string(name) + " " + dtype_safetensors_name(dt);
      const std::string path = dir + "/" + name + "_" + dtype_safetensors_name(dt) + ".safetensors";
      ref.save(path, dt);
      const auto w = DeviceWeights::create(arena, cfg, CudaWeightSource{path, 0}, groups, stream.s);
      // What the CPU loader reads, rounded to bf16 ...
      expect_same_bits(w, cfg, Weights<float>::load(cfg, path), ctx);
      // ... which for F32 and BF16 files is exactly bf16 of the seed's weights
      // (bf16 rounding is idempotent).
      if (dt != DType::f16) expect_same_bits(w, cfg, ref, ctx + " vs init");
      expect_groups_contiguous(w, groups, ctx);
      EXPECT_EQ(w.bytes(), 2 * param_count(cfg)) << ctx;
      EXPECT_EQ(arena.report().at(MemCategory::weights), w.bytes()) << ctx;
    }
  }
  fs::remove_all(dir);
}

// The message of the InputError f throws ("" and a test failure if none).
template <class F>
std::string input_error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InputError thrown";
  return "";
}

TEST(DeviceWeights, BadFilesFailLikeTheCpuLoader) {
  YOCO_REQUIRE_GPU();
  auto backend = cuda_backend();
  DeviceArena arena(*backend);
  Stream stream;
  const std::string dir = temp_dir();
  const auto gret = preset_config("yoco-tiny");
  const auto swa = preset_config("yoco-swa-tiny");
  auto wide = gret;
  wide.vocab_size = 600;
  const std::string gret_file = dir + "/gret.safetensors", swa_file = dir + "/swa.safetensors";
  Weights<float>::init(gret, 1).save(gret_file, DType::f32);
  Weights<float>::init(swa, 1).save(swa_file, DType::bf16);
  struct Case {
    const char* what;
    ModelConfig cfg;
    std::string file, fragment;
  };
  const Case cases[] = {
      {"missing tensor", gret, swa_file, "missing tensor"},      // the SWA file lacks g_proj / gt_proj
      {"extra tensor", swa, gret_file, "unexpected tensor"},     // the gRet file has them
      {"wrong shape", wide, gret_file, "embed_tokens.weight"},  // vocab 512 in the file, 600 wanted
  };
  for (const auto& c : cases) {
    const std::string cpu = input_error_of([&] { Weights<float>::load(c.cfg, c.file); });
    const std::string dev =
        input_error_of([&] { DeviceWeights::create(arena, c.cfg, CudaWeightSource{c.file, 0}, {}, stream.s); });
    EXPECT_NE(cpu.find(c.fragment), std::string::npos) << c.what << ": " << cpu;
    EXPECT_EQ(dev, cpu) << c.what;
    EXPECT_EQ(arena.report().at(MemCategory::weights), 0) << c.what << ": checked before any allocation";
    EXPECT_EQ(arena.live_buffers(), 0) << c.what;
  }
  // A file that is not there is an InputError too, naming it.
  const std::string absent = dir + "/absent.safetensors";
  const std::string dev = input_error_of([&] { DeviceWeights::create(arena, gret, CudaWeightSource{absent, 0}, {}, stream.s); });
  EXPECT_NE(dev.find(absent), std::string::npos) << dev;
  fs::remove_all(dir);
}

TEST(DeviceWeights, BadGroupsAndNamesAreRunnerBugs) {
  YOCO_REQUIRE_GPU();
  auto backend = cuda_backend();
  DeviceArena arena(*backend);
  const auto cfg = preset_config("yoco-swa-tiny");
  const std::string q = "self_decoder.layers.0.mixer.q_proj.weight", k = "self_decoder.layers.0.mixer.k_proj.weight";
  const CudaWeightSource src{"", 3};
  // g_proj does not exist in a SWA model.
  EXPECT_THROW(DeviceWeights::create(arena, cfg, src, {{q, "self_decoder.layers.0.mixer.g_proj.weight"}}, nullptr),
               std::logic_error);
  EXPECT_THROW(DeviceWeights::create(arena, cfg, src, {{q, k, q}}, nullptr), std::logic_error);
  EXPECT_THROW(DeviceWeights::create(arena, cfg, src, {{q, k}, {k}}, nullptr), std::logic_error);
  EXPECT_EQ(arena.live_buffers(), 0);
  const auto w = DeviceWeights::create(arena, cfg, src, {{q, k}}, nullptr);
  EXPECT_EQ(w[k], w[q] + w.numel(q));
  EXPECT_THROW(w["self_decoder.layers.0.mixer.g_proj.weight"], std::logic_error);
  EXPECT_THROW(w.numel("nonsense"), std::logic_error);
  const DeviceWeights empty;
  EXPECT_EQ(empty.bytes(), 0);
  EXPECT_EQ(empty.tensor_count(), 0u);
  EXPECT_THROW(empty[q], std::logic_error);
}

}  // namespace
}  // namespace yoco::cuda

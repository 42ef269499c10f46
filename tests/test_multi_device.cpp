// The prefill on R devices (bench/analytic/multi_device): one device is the
// roofline, compute divides by R, YOCO's link bytes do not grow with the
// prompt and equal dist/'s formula, the Transformer's ring bytes do.
#include <gtest/gtest.h>

#include <string>

#include "errors.hpp"
#include "multi_device.hpp"

namespace yoco::cost {
namespace {

TEST(MultiDevice, OneDeviceIsTheRooflineAndComputeDividesByR) {
  const ModelConfig cfg = preset_config("yoco-3b");
  const Storage st;
  const DeviceSpec h100 = device_spec("h100");
  const Interconnect nv = interconnect("nvlink");
  const MultiDevicePrefill one = multi_device_prefill(cfg, st, h100, nv, 1, 1, 1 << 20, 32768);
  EXPECT_DOUBLE_EQ(one.total_s, roofline_time(prefill_work(cfg, st, 1, 1 << 20, 32768), h100));
  EXPECT_EQ(one.comm_bytes, 0);
  const MultiDevicePrefill four = multi_device_prefill(cfg, st, h100, nv, 4, 1, 1 << 20, 32768);
  EXPECT_DOUBLE_EQ(four.compute_s, one.total_s / 4);
  EXPECT_GT(four.total_s, four.compute_s);  // YOCO waits for its collectives
  EXPECT_LT(four.memory_per_device, one.memory_per_device);
}

TEST(MultiDevice, YocosBytesAreDistsFormulaAndDoNotGrowWithThePrompt) {
  const ModelConfig cfg = preset_config("yoco-3b");
  const Storage st;
  const DeviceSpec h100 = device_spec("h100");
  const Interconnect nv = interconnect("nvlink");
  const double a = multi_device_prefill(cfg, st, h100, nv, 4, 1, 32768, 32768).comm_bytes;
  const double b = multi_device_prefill(cfg, st, h100, nv, 4, 1, 4 << 20, 32768).comm_bytes;
  EXPECT_EQ(a, b);
  const double D = cfg.self_head_dim();
  const double want = 3.0 * (cfg.n_self_layers() * cfg.n_self_heads * (D * D + 1) * 4 +
                             cfg.n_cross_layers() * cfg.n_attn_heads * (cfg.attn_head_dim() + 2) * 4.0) +
                      cfg.dim * 4.0;
  EXPECT_DOUBLE_EQ(a, want);
}

TEST(MultiDevice, TheTransformersRingBytesGrowWithThePromptAndOverlapTheCompute) {
  const ModelConfig cfg = preset_config("transformer-3b");
  const Storage st;
  const DeviceSpec h100 = device_spec("h100");
  const Interconnect nv = interconnect("nvlink");
  const MultiDevicePrefill m = multi_device_prefill(cfg, st, h100, nv, 4, 1, 1 << 20, 32768);
  const double ring = cfg.n_layers * 0.75 * (1 << 20) * 2.0 * cfg.kv_width() * 2;
  EXPECT_DOUBLE_EQ(m.comm_bytes, ring + cfg.dim * 4.0);
  // Compute-bound at 1M over NVLink: the ring hides under each layer's compute.
  EXPECT_DOUBLE_EQ(m.total_s, m.compute_s);
  // Over a slow link the ring is the limit.
  const MultiDevicePrefill slow = multi_device_prefill(cfg, st, h100, interconnect("1"), 4, 1, 1 << 20, 32768);
  EXPECT_GT(slow.total_s, slow.compute_s);
}

TEST(MultiDevice, BadInputIsRefusedWithTheOptionsName) {
  EXPECT_THROW(interconnect("fast"), InputError);
  EXPECT_THROW(interconnect("-3"), InputError);
  // Parsed by stod, yet no link's bandwidth: the times would be 0 or overflow.
  for (const char* absurd : {"inf", "1e300", "1e-300", "nan"}) EXPECT_THROW(interconnect(absurd), InputError) << absurd;
  const ModelConfig cfg = preset_config("yoco-tiny");
  // A length shorter than the device count: the message named neither option.
  try {
    multi_device_prefill(cfg, Storage{}, device_spec("h100"), interconnect("pcie"), 8, 1, 4, 32768);
    ADD_FAILURE() << "4 tokens split over 8 devices";
  } catch (const InputError& e) {
    for (const char* n : {"--devices 8", "--lengths", "4 tokens"})
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
  // The Transformer's two chunks a device, as the sharded runners split it: 1K tokens over 1000 devices was
  // projected (one token a device) where the runners refuse anything under 2000.
  const ModelConfig t = preset_config("transformer-tiny");
  EXPECT_THROW(multi_device_prefill(t, Storage{}, device_spec("h100"), interconnect("pcie"), 1000, 1, 1024, 32768),
               InputError);
  EXPECT_NO_THROW(multi_device_prefill(t, Storage{}, device_spec("h100"), interconnect("pcie"), 512, 1, 1024, 32768));
  EXPECT_NO_THROW(multi_device_prefill(cfg, Storage{}, device_spec("h100"), interconnect("pcie"), 1000, 1, 1024, 32768));
}

}  // namespace
}  // namespace yoco::cost

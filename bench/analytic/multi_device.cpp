#include "multi_device.hpp"

#include <algorithm>
#include <cmath>

#include "args.hpp"
#include "errors.hpp"

namespace yoco::cost {

Interconnect interconnect(const std::string& spec) {
  constexpr double kLatency = 10e-6;
  if (spec == "nvlink") return {"NVLink 4 (450 GB/s a direction)", 450e9, kLatency};
  if (spec == "pcie") return {"PCIe Gen5 x16 (64 GB/s a direction)", 64e9, kLatency};
  const double gbs = cli::parse_decimal(spec).value_or(0);
  if (!(gbs > 0))
    throw InputError("--link: expected nvlink, pcie or a bandwidth in GB/s, got '" + spec + "'");
  // stod takes "inf" and 1e300: the link times would be 0 or overflow, and
  // the rows would say "inf GB/s link". A real link is within 1 MB/s .. 1 PB/s
  // (NVLink 5: 900 GB/s a direction).
  if (!(gbs >= 1e-3 && gbs <= 1e6))
    throw InputError("--link: " + spec + " GB/s is not a link's bandwidth (give 0.001 to 1000000 GB/s)");
  return {spec + " GB/s link", gbs * 1e9, kLatency};
}

MultiDevicePrefill multi_device_prefill(const ModelConfig& cfg, const Storage& st, const DeviceSpec& dev,
                                        const Interconnect& link, int devices, int64_t batch, int64_t prompt,
                                        int64_t prefill_chunk) {
  if (devices < 1) throw InputError("--devices: every count must be >= 1");
  // The runners' rule: the Transformer was projected down to one token a device, which they refuse.
  if (const int parts = shards_per_device(cfg); prompt < static_cast<int64_t>(devices) * parts)
    // Named as the user gave them (yoco model --lengths, --devices): "a prompt" named no option.
    throw InputError("--devices " + std::to_string(devices) + ": a length (--lengths) of " + std::to_string(prompt) +
                     " tokens cannot be split over " + std::to_string(devices) + " devices (" +
                     (parts == 1 ? "each holds at least one token" : "each holds two chunks of at least one token") +
                     ", as the sharded runners split it)");
  MultiDevicePrefill m;
  m.devices = devices;
  const double R = devices, B = static_cast<double>(batch), N = static_cast<double>(prompt);
  const double single = roofline_time(prefill_work(cfg, st, batch, prompt, prefill_chunk), dev);
  m.compute_s = single / R;
  const int64_t share = (prompt + devices - 1) / devices;
  const MemoryCost mem = memory_cost(cfg, st, batch, prompt, prefill_tokens_in_flight(batch, share, prefill_chunk));
  m.memory_per_device = mem.weights + mem.kv_cache / R + mem.state + mem.activations;
  if (devices == 1) {
    m.total_s = m.compute_s;
    return m;
  }
  if (cfg.is_yoco()) {
    const double D = static_cast<double>(cfg.self_head_dim()), Hs = static_cast<double>(cfg.n_self_heads);
    const double self_bytes = cfg.self_decoder() == SelfDecoderKind::gret
                                  ? B * Hs * (D * D + 1) * 4
                                  : B * static_cast<double>(cfg.window() - 1) * 2 * static_cast<double>(cfg.dim) * 2;
    const double cross_bytes = B * cfg.n_attn_heads * (cfg.attn_head_dim() + 2) * 4.0;
    m.comm_bytes = (R - 1) * (cfg.n_self_layers() * self_bytes + cfg.n_cross_layers() * cross_bytes) +
                   B * static_cast<double>(cfg.dim) * 4;
    const double collectives = static_cast<double>(cfg.n_self_layers() + cfg.n_cross_layers() + 1);
    m.comm_s = m.comm_bytes / link.bandwidth + collectives * link.latency_s;
    m.total_s = m.compute_s + m.comm_s;
  } else {
    const double L = static_cast<double>(cfg.n_layers);
    const double ring_bytes = (R - 1) / R * B * N * 2 * static_cast<double>(cfg.kv_width()) * 2;  // a layer
    const double ring_s = ring_bytes / link.bandwidth + (R - 1) * link.latency_s;
    m.comm_bytes = L * ring_bytes + B * static_cast<double>(cfg.dim) * 4;
    m.comm_s = L * ring_s;
    m.total_s = L * std::max(m.compute_s / L, ring_s);
  }
  return m;
}

}  // namespace yoco::cost

#pragma once
// The roofline extended to R devices holding the sequence sharded (dist/:
// chunk-parallel YOCO, the Transformer's context parallelism), joined by a
// link of given bandwidth and per-collective latency. Compute divides by R
// (both prefills are token-parallel: GEMMs, gRet and SWA are linear in the
// tokens, the Transformer's causal attention is balanced by the 2R-chunk
// layout); communication is dist/'s collectives (the same labels and counts)
// with the device payloads a GPU path sends (fp32 states and partials, bf16
// keys and values; dist/'s CPU reference moves them as fp64):
//  - YOCO, per self-decoder layer one allgather of fp32 (total decay, state)
//    pairs, B x Hs x (D^2 + 1) x 4 bytes a rank (SWA: the last W - 1 bf16 keys
//    and values, B x (W - 1) x 2 d x 2), waited for (the scan is a sync point);
//    per cross layer the last position's split-KV partials; independent of N;
//  - the Transformer, per layer a ring of R - 1 steps passing bf16 keys and
//    values: (R - 1) / R x B x N x 2 x kv_width x 2 bytes a rank, overlapped
//    with that layer's attention and GEMMs (ring attention's point), so a
//    layer takes max(compute, ring).
// Memory per device: the weights (replicated), the caches / R, the state, the
// activations of its share (not the ring's two in-flight blocks of keys and
// values, 2 x B x N / R x 2 kv_width bf16, small beside the cache).
#include <cstdint>
#include <string>

#include "config.hpp"
#include "cost_model.hpp"
#include "device_spec.hpp"

namespace yoco::cost {

struct Interconnect {
  std::string name;
  double bandwidth = 0;    // bytes/s a device receives (one direction)
  double latency_s = 0;    // per collective or ring step
};
// "nvlink" (NVLink 4 on H100/H200 SXM: 450 GB/s a direction), "pcie" (PCIe
// Gen5 x16: 64 GB/s a direction), or a rate in GB/s from 0.001 to 1e6; latency
// 10 us (NCCL's small-message latency within a node, order of magnitude).
// InputError otherwise.
Interconnect interconnect(const std::string& spec);

// The prompt's parts a device (a rank) holds: YOCO one contiguous shard, the
// Transformer two chunks of 2R (causal load balance). The runners' rule too
// (bench/harness/dist_runner.hpp): a prompt of fewer than R x this tokens
// cannot be split.
inline int shards_per_device(const ModelConfig& cfg) { return cfg.is_yoco() ? 1 : 2; }

struct MultiDevicePrefill {
  int devices = 1;
  double compute_s = 0;        // the roofline of a device's share
  double comm_bytes = 0;       // received by a device over the whole prefill
  double comm_s = 0;           // those bytes and latencies on the link, not overlapped
  double total_s = 0;          // YOCO: compute + comm; Transformer: per layer max(compute / L, ring)
  double memory_per_device = 0;
};
MultiDevicePrefill multi_device_prefill(const ModelConfig& cfg, const Storage& st, const DeviceSpec& dev,
                                        const Interconnect& link, int devices, int64_t batch, int64_t prompt,
                                        int64_t prefill_chunk);

}  // namespace yoco::cost

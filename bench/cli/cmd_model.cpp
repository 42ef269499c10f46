// yoco model: the analytic cost model (bench/analytic/cost_model.hpp) for models ×
// lengths, as tables and result rows with method=analytic; with --calibration also the
// calibrated model's (method=calibrated).
#include <algorithm>
#include <iostream>
#include <map>
#include <optional>
#include <set>

#include "analytic_options.hpp"
#include "analytic_rows.hpp"
#include "args.hpp"
#include "calibration_check.hpp"
#include "errors.hpp"
#include "commands.hpp"
#include "format.hpp"
#include "lists.hpp"
#include "multi_device.hpp"
#include "result_output.hpp"

namespace yoco::cli {

namespace {

constexpr int64_t kMaxGen = cost::kMaxThroughputGen;  // see there

CommandSpec model_spec() {
  CommandSpec s;
  s.path = "yoco model";
  s.usage = "yoco model [--model A,B] [--lengths 32K,...,1M] [--batch N] [--gen N] [options]";
  s.summary =
      "The analytic cost model: memory by category, FLOPs and bytes moved by part for the prefill and one\n"
      "decode step, roofline times on a device, throughput (DESIGN.md §4) and KV cache bytes per token —\n"
      "computed from the model's shapes, in rows with method=analytic. With --calibration it adds the calibrated\n"
      "model's rows (method=calibrated; min/max the fit's band, empty where the band is unknown).";
  s.options = {
      {"--model", "A,B,...", "presets or config files (default yoco-3b,transformer-3b)"},
      {"--lengths", "N,...", "sequence lengths, K = 1024, M = 1048576, at most 2^40 (default 32K,64K,128K,256K,512K,1M)"},
      {"--batch", "N", "sequences for the memory, prefill and decode points (default 1)"},
      {"--gen", "N", "generated tokens of the throughput protocol; K = 1024, M = 1048576 (default 1024, at most "
                     "4194304 = 2^22 = 4M; prompt = length - gen)"},
      {"--throughput-batch", "auto|N", "throughput batch (default auto: the largest that fits in 95% of the device)"},
      {"--prefill-chunk", "N", "prefill chunk in tokens (default 32768)"},
      {"--parts", "", "also print prefill and decode split by part (gemm, attention, gret, norms, lm_head)"},
      {"--all-presets", "", "KV bytes per token for every preset (the default when --model is not given)"},
      {"--format", "table|csv|json", "what goes to stdout (default table)"},
      {"--out", "FILE.csv", "also write the rows as CSV"},
      {"--calibration", "FILE", "also the calibrated model (yoco calibrate --out): rows with method calibrated, "
                                "each with a band from the fit's residuals; the runners' bf16 storage only (other --*-dtype refused)"},
      {"--what-if", "F[.B]=ceiling|X", "with --calibration: kernel family F (gemm, attention, gret, norms; bound B "
                                       "compute|memory) at its roofline or at efficiency X; or attention_prefill=vN: "
                                       "every prefill attention at flash prefill vN's measured time; one what-if a "
                                       "run (given twice is refused: run once per what-if)"},
      {"--ffn-fused", "", "with --calibration: the runners with the FFN's up half as one kernel (YOCO_FFN_FUSED=1: "
                          "the W1|W3 GEMM writes F, not 2F, and the SwiGLU pass is gone; a Hopper kernel, so on "
                          "other cards a what-if)"},
      {"--ffn-rows", "N", "with --calibration: YOCO's prefill FFN in row blocks of N, K = 1024, M = 1048576 "
                          "(the runners' YOCO_FFN_ROWS, N in rows: the FFN's "
                          "buffers hold N rows, not the step's; the memory follows, the time keeps the whole step's "
                          "GEMM efficiency)"},
      {"--sublayer-buffers", "shared|apart", "with --calibration: YOCO's prefill sublayers in one buffer (the "
                                             "runners' default) or a buffer each (YOCO_SUBLAYER_BUFFERS=apart)"},
      {"--residual-per-layer", "", "with --calibration: a layer's residual stored once (YOCO_RESIDUAL_PER_LAYER=1: "
                                   "one activation element a layer fewer through the norms, where the runners "
                                   "take it)"},
      {"--devices", "R,...", "also the prefill on R devices holding the sequence sharded (YOCO chunk-parallel, the "
                             "Transformer context-parallel; dist/): latency, bytes received and memory per device"},
      {"--link", "nvlink|pcie|GBS", "with --devices: the link between devices (default nvlink: 450 GB/s a direction; "
                                    "GBS from 0.001 to 1e6)"},
  };
  for (auto& o : analytic_option_specs()) s.options.push_back(o);
  s.notes =
      "Conventions: FLOPs count matmuls only (2mnk; causal attention half of 4·B·S²·H·Da, FlashAttention's\n"
      "convention); bytes count every tensor an op reads or writes once (the floor of a fused kernel);\n"
      "a part's roofline time is max(FLOPs/peak, bytes/bandwidth) and parts add up. Activations are the\n"
      "temporaries of one prefill chunk plus the last positions' fp32 logits. Units are decimal (GB = 1e9 B).\n"
      "The rows' columns, phases and metrics are described in reports/SCHEMA.md.\n"
      "Example (from the repository root): the H100 calibration projected to an H200, two models at 512K:\n"
      "  yoco model --calibration reports/model/calibration-nvidia-h100.csv --device-spec h200 --model yoco-3b,transformer-3b --lengths 512K";
  return s;
}

struct ModelRun {
  std::string name;
  ModelConfig cfg;
  std::vector<AnalyticPoint> points;
};

std::string gb(double b) { return strf("%.3f", b / 1e9); }
std::string secs(double s) { return s >= 1 ? strf("%.2f", s) : s >= 1e-3 ? strf("%.2f m", s * 1e3) : strf("%.1f u", s * 1e6); }

void print_tables(const std::vector<ModelRun>& runs, const std::vector<ModelConfig>& kv_models,
                  const std::vector<std::string>& kv_names, const AnalyticSettings& s, bool parts,
                  const std::vector<ResultRow>& ratios, bool calibrated) {
  std::cout << "yoco model: analytic (computed from the shapes, not measured)"
            << (calibrated ? "; the calibrated model below" : "") << "\n"
            << "storage: weights " << cost::storage_name(s.storage.weights) << ", KV cache "
            << cost::storage_name(s.storage.kv_cache) << ", activations " << cost::storage_name(s.storage.activations)
            << ", gRet state " << cost::storage_name(s.storage.state) << "; prefill chunk " << s.prefill_chunk
            << "; batch " << s.batch << "\n"
            << "device: " << describe_device(s.device) << "\n\n";
  std::cout << "Memory (GB) with a cache of N tokens per sequence\n";
  TextTable mem({"model", "N", "weights", "kv_cache", "state", "activations", "total", "fits device"});
  for (const auto& r : runs)
    for (const auto& p : r.points)
      mem.add_row({r.name, length_label(p.seq_len), gb(p.memory.weights), gb(p.memory.kv_cache), gb(p.memory.state),
                   gb(p.memory.activations), gb(p.memory.total()),
                   s.device.memory_bytes <= 0 ? "?" : p.memory.total() <= s.device.memory_bytes ? "yes" : "NO"});
  std::cout << mem.str() << "\n";
  std::cout << "Prefill of N tokens and one decode step at context N (roofline; s, m = ms, u = us)\n";
  TextTable ph({"model", "N", "prefill TFLOP", "prefill GB", "prefill s", "decode GFLOP", "decode GB", "decode s"});
  for (const auto& r : runs)
    for (const auto& p : r.points) {
      const auto pt = p.prefill.total(), dt = p.decode.total();
      ph.add_row({r.name, length_label(p.seq_len), strf("%.2f", pt.flops / 1e12), strf("%.1f", pt.bytes / 1e9),
                  secs(p.prefill_s), strf("%.2f", dt.flops / 1e9), strf("%.2f", dt.bytes / 1e9), secs(p.decode_s)});
    }
  std::cout << ph.str() << "\n";
  if (parts) {
    for (const char* phase : {"prefill", "decode"}) {
      std::cout << "Roofline time by part, " << phase << " (s, m = ms, u = us; bound: C compute, M memory)\n";
      std::vector<std::string> head = {"model", "N"};
      for (int i = 0; i < cost::kParts; ++i) head.push_back(cost::part_name(static_cast<cost::Part>(i)));
      TextTable t(head);
      for (const auto& r : runs)
        for (const auto& p : r.points) {
          const auto& w = std::string(phase) == "prefill" ? p.prefill : p.decode;
          std::vector<std::string> row = {r.name, length_label(p.seq_len)};
          for (const auto& part : w.parts) {
            if (part.flops == 0 && part.bytes == 0) {
              row.push_back("-");
              continue;
            }
            const bool compute = part.flops / s.device.peak_flops >= part.bytes / s.device.bandwidth;
            row.push_back(secs(cost::roofline_time(part, s.device)) + (compute ? " C" : " M"));
          }
          t.add_row(row);
        }
      std::cout << t.str() << "\n";
    }
  }
  std::cout << "Throughput: prompt N - " << s.gen << ", " << s.gen << " generated, "
            << (s.tp_batch > 0 ? "batch " + std::to_string(s.tp_batch) : std::string("largest batch that fits"))
            << "; prefills one sequence at a time\n";
  TextTable tp({"model", "N", "batch", "prefill s", "decode s", "tokens/s"});
  for (const auto& r : runs)
    for (const auto& p : r.points) {
      if (!p.has_throughput) {
        tp.add_row({r.name, length_label(p.seq_len), "-", "-", "-", "length <= --gen " + std::to_string(s.gen)});
        continue;
      }
      const auto& t = p.throughput;
      if (t.batch == 0) {
        tp.add_row({r.name, length_label(p.seq_len), "0", "-", "-", "does not fit (" + gb(t.memory.total()) + " GB)"});
        continue;
      }
      tp.add_row({r.name, length_label(p.seq_len), std::to_string(t.batch), secs(t.prefill_s), secs(t.decode_s),
                  strf("%.1f", t.tokens_per_s)});
    }
  std::cout << tp.str() << "\n";
  if (!ratios.empty()) {
    std::cout << "YOCO vs Transformer (x; higher = YOCO better)\n";
    TextTable rt({"pair", "N", "metric", "ratio"});
    for (const auto& q : ratios)
      if (q.seq_len > 0 || q.phase == "kv_cache")
        rt.add_row({q.model, q.seq_len ? length_label(q.seq_len) : "-", q.metric, strf("%.2f", *q.value)});
    std::cout << rt.str() << "\n";
  }
  std::cout << "KV cache per token (KV " << cost::storage_name(s.storage.kv_cache) << "; the paper's figure 8)\n";
  TextTable kv({"model", "layers", "KV heads x dim", "bytes/token", "tokens per GB", "tokens per GiB"});
  for (size_t i = 0; i < kv_models.size(); ++i) {
    const auto& c = kv_models[i];
    const double b = cost::kv_cache_bytes_per_token(c, s.storage);
    kv.add_row({kv_names[i], std::to_string(c.n_layers),
                std::to_string(c.n_attn_kv_heads) + " x " + std::to_string(c.attn_head_dim()), strf("%.0f", b),
                strf("%.0f", 1e9 / b), strf("%.0f", 1073741824.0 / b)});
  }
  std::cout << kv.str();
}

// The calibrated model's rows (method calibrated, min/max its band) for models
// x lengths on s.device: prefill, decode step, throughput at the analytic batch
// (the runners' batch search), memory.
std::vector<ResultRow> calibrated_rows(const cost::Calibration& cal, const NamedConfigs& models,
                                       const std::vector<int64_t>& lengths, const AnalyticSettings& s,
                                       const std::string& what_if, const cost::RunnerLayout& layout) {
  const cost::DeviceSpec ceil = cost::calibrated_ceilings(cal, s.device);
  const std::string fused = layout.ffn_up_fused ? std::string(", ") + cost::ffn_up_fused_note() : "";
  const Provenance prov = Provenance::here(
      "calibrated", "calibrated: " + s.device.name + (what_if.empty() ? "" : ", what-if " + what_if) + fused, "");
  const std::string from = "calibration " + cal.source + " (" + cal.device_name + ", " + cal.fitted_at + "); " +
                           ceil.source + ": " + strf("%.0f", ceil.peak_flops / 1e12) + " TFLOP/s, " +
                           strf("%.0f", ceil.bandwidth / 1e9) + " GB/s";
  std::vector<ResultRow> out;
  // unbanded: why the band is unknown (CalibratedPhase::unbanded); then no min/max, and the notes say why.
  auto add = [&](const std::string& model, int64_t len, int64_t batch, int64_t gen, const std::string& phase,
                 const std::string& metric, double v, const std::string& unit, double band, const std::string& extra,
                 const std::string& unbanded = "") {
    ResultRow r = make_row(prov, model, len, batch, gen, phase, metric, v, unit, "calibrated", 0,
                           from + (unbanded.empty() ? "; band +-" + strf("%.1f%%", 100 * band) + " (worst fit residual)"
                                                    : "; band unknown (" + unbanded + ")") +
                               extra);
    r.min = unbanded.empty() ? std::optional<double>(v * (1 - band)) : std::nullopt;
    r.max = unbanded.empty() ? std::optional<double>(v * (1 + band)) : std::nullopt;
    out.push_back(r);
  };
  for (size_t i = 0; i < models.names.size(); ++i) {
    const ModelConfig& cfg = models.configs[i];
    for (int64_t len : lengths) {
      const cost::CalibratedPhase p =
          cost::calibrated_prefill(cfg, s.storage, cal, ceil, s.batch, len, s.prefill_chunk, layout);
      const cost::CalibratedPhase d = cost::calibrated_decode(cfg, s.storage, cal, ceil, s.batch, len, layout);
      const bool host_bound = p.host_s > 0 && p.host_s >= p.total_s;
      cost::RunnerLayout said = layout;
      if (!cfg.is_yoco()) {  // the Transformer's runner has no FFN row blocks and no sublayer switch
        said.ffn_rows = 0;
        said.shared_sublayers = true;
      }
      const std::string chunk_note =
          "; prefill chunk " + std::to_string(s.prefill_chunk) + " tokens" + cost::runner_layout_note(said);
      add(models.names[i], len, s.batch, 0, "prefill", "prefill_latency_s", p.total_s, "s", p.band,
          chunk_note + (p.kernels.empty() ? "" : "; " + p.kernels) + (p.fallback.empty() ? "" : "; fallback: " + p.fallback) +
              (host_bound ? "; host-bound: the runner's calls take longer to enqueue than the kernels run" : ""),
          p.unbanded);
      for (int f = 0; f < cost::kFamilies; ++f)
        if (p.family_s[f] > 0)
          add(models.names[i], len, s.batch, 0, std::string("prefill.") + cost::family_name(static_cast<cost::Family>(f)),
              "gpu_time_s", p.family_s[f], "s", p.band, "", p.unbanded);
      add(models.names[i], len, s.batch, 0, "decode", "decode_step_latency_s", d.total_s, "s", d.band,
          d.fallback.empty() ? "" : "; fallback: " + d.fallback, d.unbanded);
      for (int f = 0; f < cost::kFamilies; ++f)
        if (d.family_s[f] > 0)
          add(models.names[i], len, s.batch, 0, std::string("decode.") + cost::family_name(static_cast<cost::Family>(f)),
              "gpu_time_s", d.family_s[f], "s", d.band, "", d.unbanded);
      add(models.names[i], len, s.batch, 0, "memory", "mem_total_bytes",
          cost::calibrated_memory(cfg, cal, ceil, s.batch, len, 0, s.prefill_chunk, layout), "B", 0.0,
          chunk_note + "; the runners' buffers by their own formula (cuda/runner/generation_bytes.hpp)");
      if (len > s.gen) {
        const cost::ThroughputCost t =
            cost::throughput_cost(cfg, s.storage, s.device, len, s.gen, s.tp_batch, s.prefill_chunk, s.max_batch);
        if (t.batch > 0) {
          double band = 0;
          std::string unbanded;
          const double tps =
              cost::calibrated_throughput(cfg, s.storage, cal, ceil, len, s.gen, t.batch, s.prefill_chunk, &band,
                                          false, layout, &unbanded);
          add(models.names[i], len, t.batch, s.gen, "throughput", "throughput_tokens_per_s", tps, "tokens/s", band,
              "; batch from the analytic search", unbanded);
        }
      }
    }
  }
  return out;
}

// The prefill on R devices (multi_device.hpp), rows per model, length and R:
// prefill (latency), comm (bytes a device receives), memory (per device). The
// device column says R, the card and the link.
std::vector<ResultRow> multi_device_rows(const std::string& devices_spec, const std::string& link_spec,
                                         const NamedConfigs& models, const std::vector<int64_t>& lengths,
                                         const AnalyticSettings& s) {
  const cost::Interconnect link = cost::interconnect(link_spec);
  std::vector<int> devices;
  for (const auto& d : split_unique_list("--devices", devices_spec))
    devices.push_back(static_cast<int>(parse_int("--devices", d, 1, 4096)));
  std::vector<ResultRow> out;
  for (int R : devices) {
    const Provenance prov = Provenance::here("analytic-x" + std::to_string(R),
                                             std::to_string(R) + " x " + s.device.name + " over " + link.name, "");
    for (size_t i = 0; i < models.names.size(); ++i)
      for (int64_t len : lengths) {
        const cost::MultiDevicePrefill m = cost::multi_device_prefill(models.configs[i], s.storage, s.device, link, R,
                                                                      s.batch, len, s.prefill_chunk);
        const std::string note = std::to_string(R) + " devices; compute " + strf("%.4g", m.compute_s) + " s, link " +
                                 strf("%.4g", m.comm_s) + " s (" +
                                 (models.configs[i].is_yoco() ? "waited for" : "ring, overlapped per layer") + ")";
        out.push_back(make_row(prov, models.names[i], len, s.batch, 0, "prefill", "prefill_latency_s", m.total_s, "s",
                               "analytic", 0, note));
        out.push_back(make_row(prov, models.names[i], len, s.batch, 0, "comm", "comm_bytes_received", m.comm_bytes, "B",
                               "analytic", 0, "a device, the whole prefill; " + note));
        // As the one-device table's "fits device": a projection that a device cannot hold says so.
        const std::string fits =
            s.device.memory_bytes > 0 && m.memory_per_device > s.device.memory_bytes
                ? strf("; does not fit a device (%.3g GB > %.3g GB)", m.memory_per_device / 1e9,
                       s.device.memory_bytes / 1e9)
                : std::string();
        out.back().notes += fits;
        out[out.size() - 2].notes += fits;
        out.push_back(make_row(prov, models.names[i], len, s.batch, 0, "memory", "mem_per_device_bytes",
                               m.memory_per_device, "B", "analytic", 0,
                               "weights + caches / R + state + activations" + fits));
      }
  }
  return out;
}

void print_multi_device(const std::vector<ResultRow>& rows, double device_memory_bytes) {
  std::cout << "\nPrefill on R devices (sequence sharded; " << rows.front().prov.device_name.substr(
                                                                  rows.front().prov.device_name.find(" over ") + 6)
            << ")\n";
  TextTable t({"model", "N", "devices", "prefill s", "received / device", "memory / device", "fits device"});
  for (size_t i = 0; i + 2 < rows.size(); i += 3)
    t.add_row({rows[i].model, length_label(rows[i].seq_len), rows[i].prov.device_name.substr(0, rows[i].prov.device_name.find(' ')),
               strf("%.4g", *rows[i].value), strf("%.3g GB", *rows[i + 1].value / 1e9),
               strf("%.3g GB", *rows[i + 2].value / 1e9),
               device_memory_bytes <= 0                                       ? "?"
               : rows[i + 2].notes.find("does not fit") != std::string::npos ? "NO"
                                                                              : "yes"});
  std::cout << t.str();
}

void print_calibrated(const std::vector<ResultRow>& rows) {
  std::cout << "\nCalibrated model (" << rows.front().prov.device_name << "; " << rows.front().notes.substr(0, rows.front().notes.find("; band"))
            << ")\n";
  TextTable t({"model", "N", "batch", "metric", "calibrated", "band"});
  // Rows without a band (CalibratedPhase::unbanded), and rows with a family at the roofline, said under
  // the table: the number is the model's, but not one the fit's residuals bound.
  std::map<std::string, std::set<std::string>> unknown, fallbacks;
  auto note_of = [](const ResultRow& r, const std::string& head) -> std::string {
    const size_t at = r.notes.find(head);
    if (at == std::string::npos) return "";
    const size_t from = at + head.size();
    const size_t end = head.back() == '(' ? r.notes.find(')', from) : r.notes.find(';', from);
    return r.notes.substr(from, end == std::string::npos ? end : end - from);
  };
  for (const auto& r : rows)
    if (r.phase.find('.') == std::string::npos) {
      const std::string why = note_of(r, "band unknown (");
      t.add_row({r.model, length_label(r.seq_len), std::to_string(r.batch), r.metric, strf("%.4g", *r.value),
                 r.min && r.max ? "[" + strf("%.4g", *r.min) + ", " + strf("%.4g", *r.max) + "]" : "unknown *"});
      if (!why.empty()) unknown[r.metric + ": " + why].insert(r.model);
      if (const std::string fb = note_of(r, "fallback: "); !fb.empty()) fallbacks[r.phase + ": " + fb].insert(r.model);
    }
  std::cout << t.str();
  auto who = [](const std::set<std::string>& models) {
    std::string w;
    for (const auto& m : models) w += (w.empty() ? "" : ", ") + m;
    return w;
  };
  for (const auto& [what, models] : unknown)
    std::cout << "* band unknown, " << what << " (" << who(models) << ")\n";
  for (const auto& [what, models] : fallbacks)
    std::cout << "fallback, " << what << " (" << who(models) << ")\n";
  // The kernel versions priced apart from the fit's (the prefill rows' notes), once each, by model.
  std::map<std::string, std::set<std::string>> versions;
  for (const auto& r : rows) {
    const size_t at = r.metric == "prefill_latency_s" ? r.notes.find("attention prefill v") : std::string::npos;
    if (at != std::string::npos) versions[r.notes.substr(at, r.notes.find(';', at) - at)].insert(r.model);
  }
  for (const auto& [what, models] : versions) {
    std::string who;
    for (const auto& m : models) who += (who.empty() ? "" : ", ") + m;
    std::cout << "prefill: " << what << " (" << who << ")\n";
  }
}

}  // namespace

int cmd_model(const Args& args) {
  const CommandSpec spec = model_spec();
  if (print_help_if_asked(spec, args)) return 0;
  const ParsedArgs a = parse_args(spec, args);
  AnalyticSettings s = analytic_settings(a);
  s.batch = a.get_int("--batch", 1, 1, 1 << 20);
  s.gen = a.get("--gen") ? parse_length("--gen", *a.get("--gen"), kMaxGen) : 1024;  // 1K as --lengths reads it
  s.prefill_chunk = a.get_int("--prefill-chunk", kDefaultPrefillChunk, 1, int64_t{1} << 40);
  const std::string tpb = a.get_or("--throughput-batch", "auto");
  s.tp_batch = tpb == "auto" ? 0 : parse_int("--throughput-batch", tpb, 1, 1 << 20);
  const OutputFormat format = parse_output_format(a);
  const auto names = split_unique_list("--model", a.get_or("--model", "yoco-3b,transformer-3b"));
  const auto lengths = parse_length_list("--lengths", a.get_or("--lengths", "32K,64K,128K,256K,512K,1M"));
  if (const auto out = a.get("--out")) {
    if (const auto cal = a.get("--calibration")) refuse_output_over_input("--out", *out, *cal, "the --calibration file");
    for (const auto& n : names) refuse_output_over_input("--out", *out, n, "a --model file");
  }

  const Provenance prov = Provenance::here("analytic", s.device.name, "");
  NamedConfigs models;
  for (const auto& n : names) {
    models.names.push_back(n);
    models.configs.push_back(resolve_model(n));
  }
  const NamedConfigs kv = !a.has("--model") || a.has("--all-presets") ? presets_by_size() : models;
  const std::vector<ResultRow> rows = analytic_sweep_rows(models, lengths, kv, s, prov);
  std::vector<ModelRun> runs;
  for (size_t i = 0; i < names.size(); ++i) {
    ModelRun r{names[i], models.configs[i], {}};
    for (int64_t len : lengths) r.points.push_back(analytic_point(r.cfg, len, s));
    runs.push_back(std::move(r));
  }
  std::vector<ResultRow> cal_rows;
  if (a.has("--what-if") && !a.has("--calibration")) throw InputError("--what-if needs --calibration");
  if (a.has("--ffn-fused") && !a.has("--calibration")) throw InputError("--ffn-fused needs --calibration");
  if (a.has("--ffn-rows") && !a.has("--calibration")) throw InputError("--ffn-rows needs --calibration");
  if (a.has("--sublayer-buffers") && !a.has("--calibration"))
    throw InputError("--sublayer-buffers needs --calibration");
  if (a.has("--residual-per-layer") && !a.has("--calibration"))
    throw InputError("--residual-per-layer needs --calibration");
  if (a.has("--calibration")) {
    // The calibration is fitted on the CUDA runners, which store bf16 weights, caches and activations,
    // and its memory row is their buffers' own formula: another storage would give rows that look
    // calibrated but are bf16's (the memory) or a bf16 fit scaled by bytes it never measured.
    for (const char* o : {"--weights-dtype", "--kv-dtype", "--act-dtype"})
      if (const auto v = a.get(o); v && *v != "bf16")
        throw InputError(std::string(o) + " " + *v + " with --calibration: the calibrated model is the CUDA runners', "
                         "which store bf16 (weights, KV cache, activations); drop " + o +
                         " or --calibration (the analytic rows take any storage)");
  }
  if (const auto file = a.get("--calibration")) {
    cost::Calibration cal = cost::read_calibration(*file);
    std::string what_if;
    if (const auto w = a.get("--what-if")) what_if = cost::apply_what_if(cal, *w);
    cost::RunnerLayout layout = cost::current_runner_layout();
    if (a.has("--ffn-fused")) layout.ffn_up_fused = true;
    if (a.has("--residual-per-layer")) layout.residual_per_layer = true;
    // A count of rows, K and M as the other counts take them (--ffn-rows 8K); 0 (not given): the step's rows.
    if (const auto r = a.get("--ffn-rows")) layout.ffn_rows = parse_length("--ffn-rows", *r, int64_t{1} << 40);
    if (const auto sb = a.get("--sublayer-buffers")) {
      if (*sb != "shared" && *sb != "apart")
        throw InputError("--sublayer-buffers: expected shared or apart, got '" + *sb + "'");
      layout.shared_sublayers = *sb == "shared";
    }
    cal_rows = calibrated_rows(cal, models, lengths, s, what_if, layout);
  }
  std::vector<ResultRow> multi_rows;
  if (a.has("--link") && !a.has("--devices")) throw InputError("--link needs --devices");
  if (const auto d = a.get("--devices")) multi_rows = multi_device_rows(*d, a.get_or("--link", "nvlink"), models, lengths, s);
  std::vector<ResultRow> all = rows;
  all.insert(all.end(), cal_rows.begin(), cal_rows.end());
  all.insert(all.end(), multi_rows.begin(), multi_rows.end());
  std::vector<ResultRow> ratios;
  for (const auto& r : rows)
    if (r.unit == "x") ratios.push_back(r);
  emit_rows(a, format, all, [&] {
    print_tables(runs, kv.configs, kv.names, s, a.has("--parts"), ratios, !cal_rows.empty());
    if (!cal_rows.empty()) print_calibrated(cal_rows);
    if (!multi_rows.empty()) print_multi_device(multi_rows, s.device.memory_bytes);
  });
  return 0;
}

}  // namespace yoco::cli

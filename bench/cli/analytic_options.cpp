#include "analytic_options.hpp"

#include "args.hpp"
#include "errors.hpp"
#include "format.hpp"

namespace yoco::cli {

using cost::StorageType;

std::vector<OptionSpec> analytic_option_specs() {
  return {
      {"--weights-dtype", "bf16|fp16|fp8|int8|fp32", "weight storage (default bf16)"},
      {"--kv-dtype", "bf16|fp8|int8|fp32", "KV cache storage (default bf16)"},
      {"--act-dtype", "bf16|fp32", "activation storage (default bf16); gRet states are always fp32"},
      {"--device-spec", "h100|h200|b200", "roofline rates and capacity from the vendor datasheet (default h100)"},
      {"--peak-tflops", "X", "custom device: dense matmul rate in TFLOP/s (with --peak-gbs)"},
      {"--peak-gbs", "Y", "custom device: memory bandwidth in GB/s (with --peak-tflops)"},
      {"--memory-gb", "Z", "custom device: memory capacity in GB, for the throughput batch search"},
  };
}

namespace {

// Not below 0.001: a rate of 1e-320 passed "> 0" and divided the rooflines into inf (rows of inf, exit 0).
double parse_positive(const std::string& option, const std::string& text) {
  const double v = parse_decimal(text).value_or(0);
  if (!(v >= 1e-3) || v > 1e9)
    throw InputError(option + ": expected a positive number from 0.001 to 1e9, got '" + text + "'");
  return v;
}

}  // namespace

AnalyticSettings analytic_settings(const ParsedArgs& a) {
  AnalyticSettings s;
  s.storage.weights = cost::parse_storage(
      "--weights-dtype", a.get_or("--weights-dtype", "bf16"),
      {StorageType::bf16, StorageType::fp16, StorageType::fp8, StorageType::int8, StorageType::fp32});
  s.storage.kv_cache = cost::parse_storage("--kv-dtype", a.get_or("--kv-dtype", "bf16"),
                                           {StorageType::bf16, StorageType::fp8, StorageType::int8, StorageType::fp32});
  s.storage.activations =
      cost::parse_storage("--act-dtype", a.get_or("--act-dtype", "bf16"), {StorageType::bf16, StorageType::fp32});
  const bool custom = a.has("--peak-tflops") || a.has("--peak-gbs");
  if (custom) {
    if (a.has("--device-spec")) throw InputError("--device-spec excludes --peak-tflops/--peak-gbs");
    if (!a.has("--peak-tflops") || !a.has("--peak-gbs")) throw InputError("--peak-tflops and --peak-gbs go together");
    s.device = cost::custom_device_spec(parse_positive("--peak-tflops", *a.get("--peak-tflops")),
                                        parse_positive("--peak-gbs", *a.get("--peak-gbs")),
                                        a.has("--memory-gb") ? parse_positive("--memory-gb", *a.get("--memory-gb")) : 0);
  } else {
    if (a.has("--memory-gb")) throw InputError("--memory-gb goes with --peak-tflops/--peak-gbs (a named spec has its own)");
    s.device = cost::device_spec(a.get_or("--device-spec", "h100"));
  }
  return s;
}

std::string describe_device(const cost::DeviceSpec& d) {
  return d.name + ": " + strf("%.1f", d.peak_flops / 1e12) + " TFLOP/s dense bf16, " +
         strf("%.0f", d.bandwidth / 1e9) + " GB/s" +
         (d.memory_bytes > 0 ? ", " + strf("%.0f", d.memory_bytes / 1e9) + " GB" : std::string(", capacity unknown")) +
         "\n  source: " + d.source;
}

}  // namespace yoco::cli

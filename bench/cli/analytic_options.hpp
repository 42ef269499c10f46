#pragma once
// Options shared by `yoco model` and `yoco bench` for the cost model: storage
// types, device spec, prefill chunk.
#include <vector>

#include "analytic_rows.hpp"
#include "args.hpp"

namespace yoco::cli {

// --weights-dtype, --kv-dtype, --act-dtype, --device-spec, --peak-tflops, --peak-gbs, --memory-gb.
std::vector<OptionSpec> analytic_option_specs();
// Storage types and device from those options (defaults: bf16, bf16, bf16, h100).
AnalyticSettings analytic_settings(const ParsedArgs& a);
// "H100 SXM5 80GB (datasheet): 989.4 TFLOP/s dense bf16, 3350 GB/s, 80 GB\n  source: ..."
std::string describe_device(const cost::DeviceSpec& d);

}  // namespace yoco::cli

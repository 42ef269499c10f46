// Kernel families, short names and the aggregation of activity records
// (kernel_family.hpp). Plain C++; the demangler is the C++ ABI's.
#include "kernel_family.hpp"

#include <cxxabi.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <unordered_map>

namespace yoco::cli {

namespace {

// Our own kernels (every __global__ in cuda/*.cu; baselines/ has none: the
// Transformer runner reuses cuda/'s kernels), by function name, looked up
// when the kernel lives in namespace yoco. tests/test_kernel_family.cpp checks
// that this list covers the sources.
struct OwnKernel {
  const char* name;
  const char* family;
};
constexpr OwnKernel kOwnKernels[] = {
    // gret_chunk.cu and gret_chunk_v2/v3/v5/v6.cu (v6 and v7), gret_recurrent.cu, gret_gate.cu: gRet's maths.
    {"gret_chunk_v2_kernel", "gret"},
    {"gret_chunk_v3_kernel", "gret"},
    {"gret_chunk_v5_kernel", "gret"},
    {"gret_chunk_v6_kernel", "gret"},
    {"gret_chunk_v7_kernel", "gret"},
    {"gret_segment_scan_kernel", "gret"},
    {"gret_step_generic_kernel", "gret"},
    {"gret_step_sliced_kernel", "gret"},
    {"gret_pending_flush_kernel", "gret"},
    {"gret_state_update_kernel", "gret"},
    {"log_decay_kernel", "gret"},  // the decay's log-gammas: the cost model counts their bytes under gret
    // gemm_swiglu_sm90.cu: the FFN's W1|W3 GEMM with SwiGLU in its epilogue (its time is the GEMM's).
    {"gemm_swiglu_kernel", "gemm"},
    // gemv.cu: the decode step's projections of 4 rows or fewer (YOCO_GEMV=1).
    {"gemv_kernel", "gemm"},
    // flash_prefill_v1.cu, flash_prefill_v2.cu, flash_prefill_v3.cu
    {"flash_prefill_v1_kernel", "attention_prefill"},
    {"flash_prefill_v2_kernel", "attention_prefill"},
    {"flash_prefill_v3_kernel", "attention_prefill"},
    // attention_merge.cu: ring attention's merge of a block's partial (the sharded prefill's attention).
    {"attention_merge_kernel", "attention_prefill"},
    // flash_decode.cu: split-KV partials and their combine.
    {"split_kernel", "attention_decode"},
    {"combine_kernel", "attention_decode"},
    // elementwise.cu, gret_gate.cu, cache_ops.cu: norms and elementwise ops.
    {"embedding_kernel", "norms"},
    {"rms_norm_kernel", "norms"},
    {"rms_norm_cached_kernel", "norms"},
    {"swiglu_kernel", "norms"},
    {"rope_kernel", "norms"},
    {"rope_at_kernel", "norms"},
    {"norm_gate_vec_kernel", "norms"},
    {"norm_gate_d128_kernel", "norms"},
    {"norm_gate_generic_kernel", "norms"},
    // cache_ops.cu: copies into and out of the caches, position bookkeeping.
    {"cache_write_kernel", "other"},
    {"ring_gather_kernel", "other"},
    {"advance_positions_kernel", "other"},
    {"set_positions_kernel", "other"},
    // counter_init.cu, device_ceilings.cu: weight and buffer initialisation.
    {"counter_init_kernel", "other"},
    {"counter_init_bf16_kernel", "other"},
    {"fill_bf16", "other"},
    // attention_oracle.cu, gret_oracle.cu, device_fill.cu: the GPU tests' oracles and inputs, never in a model run.
    {"gather_rows_kernel", "other"},
    {"widen_kernel", "other"},
    {"softmax_rows_kernel", "other"},
    {"fill_normal_kernel", "other"},
    {"gret_oracle_kernel", "other"},
};

bool contains(std::string_view s, std::string_view what) { return s.find(what) != std::string_view::npos; }

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

void erase_all(std::string& s, std::string_view what) {
  for (size_t p; (p = s.find(what)) != std::string::npos;) s.erase(p, what.size());
}

// A demangled (or plain) name taken apart: the function's own name (no
// return type, namespaces, template arguments or parameters) and its first
// template argument ("" when none).
struct Parts {
  std::string base, first_template_arg;
};

std::string last_component(std::string_view qualified) {
  // After the last "::" (template arguments are gone by now).
  const size_t p = qualified.rfind("::");
  return std::string(p == std::string_view::npos ? qualified : qualified.substr(p + 2));
}

Parts split_name(std::string s) {
  erase_all(s, "(anonymous namespace)::");
  erase_all(s, "(anonymous namespace)");
  std::string outer;  // depth-0 text before the parameter list
  std::string targ;   // the first template argument
  int depth = 0;
  bool first_targ_done = false, in_first_targ = false, has_params = false;
  for (const char c : s) {
    if (c == '<') {
      if (depth == 0 && !first_targ_done) in_first_targ = true;
      else if (in_first_targ) targ += c;
      ++depth;
      continue;
    }
    if (c == '>') {
      depth = std::max(0, depth - 1);
      if (in_first_targ) {
        if (depth == 0) in_first_targ = false, first_targ_done = true;
        else targ += c;
      }
      continue;
    }
    if (depth == 0) {
      if (c == '(' && !outer.empty()) {
        has_params = true;
        break;
      }
      outer += c;
    } else if (in_first_targ) {
      if (depth == 1 && c == ',') in_first_targ = false, first_targ_done = true;
      else targ += c;
    }
  }
  // A signature has its return type first ("void ns::f<...>(...)"); a plain
  // name ("memcpy HtoD", "nvjet_tst_...") is kept whole.
  std::string name = outer;
  while (!name.empty() && name.back() == ' ') name.pop_back();
  if (has_params) {
    const size_t sp = name.rfind(' ');
    if (sp != std::string::npos) name = name.substr(sp + 1);
  }
  while (!targ.empty() && targ.front() == ' ') targ.erase(targ.begin());
  while (!targ.empty() && targ.back() == ' ') targ.pop_back();
  return {last_component(name), targ};
}

// Wrappers whose name says nothing: CUTLASS's entry points.
bool generic_wrapper(std::string_view base) {
  return base == "Kernel" || base == "Kernel2" || base == "device_kernel" || base == "kernel";
}

std::string sanitize(std::string_view s) {
  std::string out;
  for (const char c : s) {
    const unsigned char u = static_cast<unsigned char>(c);
    const bool ok = std::isalnum(u) || contains("_ .:+-~()[]<>#@=/", std::string_view(&c, 1));
    const char r = ok ? c : '_';
    if (r == ' ' && (out.empty() || out.back() == ' ')) continue;  // no leading or double spaces
    out += r;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

uint32_t fnv1a(std::string_view s) {
  uint32_t h = 2166136261u;
  for (const char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 16777619u;
  }
  return h;
}

std::string bounded(std::string s) {
  if (s.size() <= kShortNameMax) return s;
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", fnv1a(s));
  return s.substr(0, kShortNameMax - 9) + "~" + hex;
}

// Library GEMM kernels (cuBLAS, cuBLASLt, CUTLASS), on the lower-cased name.
bool library_gemm(std::string_view l) {
  return contains(l, "gemm") || contains(l, "gemv") || contains(l, "nvjet") || contains(l, "xmma") ||
         contains(l, "cutlass") || contains(l, "cublas") || contains(l, "splitkreduce");
}

}  // namespace

const std::vector<std::string>& kernel_families() {
  static const std::vector<std::string> f = {"gemm", "gret", "attention_prefill", "attention_decode", "norms",
                                             "other"};
  return f;
}

const char* activity_kind_name(ActivityKind k) {
  switch (k) {
    case ActivityKind::kernel: return "kernel";
    case ActivityKind::memcpy: return "memcpy";
    case ActivityKind::memset: return "memset";
    case ActivityKind::runtime_api: return "runtime";
    case ActivityKind::driver_api: return "driver";
  }
  return "unknown";
}

std::string demangle(std::string_view name) {
  if (name.size() < 2 || name[0] != '_' || name[1] != 'Z') return std::string(name);
  const std::string mangled(name);
  int status = -1;
  char* d = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
  if (status != 0 || !d) {
    std::free(d);
    return mangled;
  }
  std::string out(d);
  std::free(d);
  return out;
}

std::string kernel_short_name(std::string_view kernel_name) {
  const Parts p = split_name(demangle(kernel_name));
  std::string base = p.base;
  if (generic_wrapper(base) && !p.first_template_arg.empty()) {
    const std::string inner = split_name(p.first_template_arg).base;
    if (!inner.empty()) base = inner;
  }
  base = sanitize(base);
  if (base.empty()) base = sanitize(kernel_name);
  if (base.empty()) base = "(unnamed)";
  return bounded(base);
}

std::string kernel_family(std::string_view kernel_name) {
  const std::string full = demangle(kernel_name);
  const std::string base = split_name(full).base;
  if (contains(full, "yoco::")) {
    for (const OwnKernel& k : kOwnKernels)
      if (base == k.name) return k.family;
  }
  const std::string l = lower(full);
  if (library_gemm(l)) return "gemm";
  // A kernel no list names (a new one of ours, another library's): by its name.
  const std::string b = lower(base);
  if (contains(b, "gret")) return "gret";
  if (contains(b, "flash_decod") || contains(b, "decode_attention") || contains(b, "flashdecod")) return "attention_decode";
  if (contains(b, "flash_prefill") || contains(b, "flash_fwd") || contains(b, "fmha")) return "attention_prefill";
  if (contains(b, "norm") || contains(b, "rope") || contains(b, "swiglu") || contains(b, "silu") ||
      contains(b, "embedding"))
    return "norms";
  return "other";
}

KernelBreakdown aggregate_kernel_times(const std::vector<ActivityRecord>& records, int64_t units) {
  if (units < 1) throw std::invalid_argument("aggregate_kernel_times: units must be >= 1");
  const double u = static_cast<double>(units);
  struct Named {
    std::string short_name, family;
  };
  std::unordered_map<std::string, Named> names;  // raw name -> short name and family (demangle once)
  struct Acc {
    uint64_t ns = 0;
    int64_t launches = 0;
    std::map<std::string, uint64_t> family_ns;
    std::map<std::string, int64_t> family_launches;
  };
  std::map<std::string, Acc> by_short;
  KernelBreakdown b;
  b.units = units;
  uint64_t total_ns = 0;
  for (const ActivityRecord& r : records) {
    if (is_api_call(r.kind)) continue;  // host time: host_api_time.hpp
    auto it = names.find(r.name);
    if (it == names.end()) {
      Named n{kernel_short_name(r.name), r.kind == ActivityKind::kernel ? kernel_family(r.name) : "other"};
      it = names.emplace(r.name, std::move(n)).first;
    }
    Acc& a = by_short[it->second.short_name];
    const uint64_t d = r.duration_ns();
    a.ns += d;
    a.launches += 1;
    a.family_ns[it->second.family] += d;
    a.family_launches[it->second.family] += 1;
    total_ns += d;
    ++b.records;
    if (!r.timed()) ++b.untimed;
  }
  std::map<std::string, FamilyTime> fam;
  for (const std::string& f : kernel_families()) fam[f].family = f;
  for (const auto& [short_name, a] : by_short) {
    // The family of most of its time (of most of its launches when untimed).
    std::string family = a.family_ns.begin()->first;
    for (const auto& [f, ns] : a.family_ns) {
      const uint64_t best = a.family_ns.at(family);
      if (ns > best || (ns == best && a.family_launches.at(f) > a.family_launches.at(family))) family = f;
    }
    KernelTime k;
    k.short_name = short_name;
    k.family = family;
    k.seconds_per_unit = static_cast<double>(a.ns) * 1e-9 / u;
    k.launches = a.launches;
    k.launches_per_unit = static_cast<double>(a.launches) / u;
    FamilyTime& ft = fam[family];
    ft.seconds_per_unit += k.seconds_per_unit;
    ft.launches += a.launches;
    ft.kernels += 1;
    b.kernels.push_back(std::move(k));
  }
  std::sort(b.kernels.begin(), b.kernels.end(), [](const KernelTime& x, const KernelTime& y) {
    if (x.seconds_per_unit != y.seconds_per_unit) return x.seconds_per_unit > y.seconds_per_unit;
    return x.short_name < y.short_name;
  });
  const std::vector<std::string>& order = kernel_families();
  for (const std::string& f : order) {
    FamilyTime ft = fam[f];
    ft.launches_per_unit = static_cast<double>(ft.launches) / u;
    b.families.push_back(ft);
  }
  std::stable_sort(b.families.begin(), b.families.end(),
                   [](const FamilyTime& x, const FamilyTime& y) { return x.seconds_per_unit > y.seconds_per_unit; });
  b.seconds_per_unit = static_cast<double>(total_ns) * 1e-9 / u;
  b.launches_per_unit = static_cast<double>(b.records) / u;
  return b;
}

KernelCut cut_kernels(const KernelBreakdown& b, double fraction) {
  KernelCut c;
  double total = 0;
  for (const KernelTime& k : b.kernels) total += k.seconds_per_unit;
  double before = 0;
  for (const KernelTime& k : b.kernels) {
    // Kept while the kernels before it make up less than `fraction` of the
    // time; with no time at all (every record untimed) every kernel is kept.
    if (total <= 0 || before < fraction * total) {
      c.kept.push_back(k);
      before += k.seconds_per_unit;
      continue;
    }
    if (!c.has_rest) {
      c.has_rest = true;
      c.rest.short_name = "(rest)";
      c.rest.family = k.family;
    } else if (c.rest.family != k.family) {
      c.rest.family = "mixed";
    }
    c.rest.seconds_per_unit += k.seconds_per_unit;
    c.rest.launches += k.launches;
    c.rest.launches_per_unit += k.launches_per_unit;
    ++c.rest_kernels;
  }
  return c;
}

}  // namespace yoco::cli

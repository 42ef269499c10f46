// Kernel families, short names and the aggregation behind --cupti
// (bench/harness/kernel_family.hpp): real cuBLAS / cuBLASLt / CUTLASS kernel
// names as profilers show them, each of our __global__ kernels by its real
// mangled name (nvcc 13.0, taken from the registration of each cuda/**/*.cu),
// a check that the list below covers every __global__ in cuda/ and
// baselines/, and the per-unit grouping with its 99.9% cut.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernel_family.hpp"

namespace yoco::cli {
namespace {

bool csv_safe(const std::string& s) {
  for (const char c : s)
    if (c == ',' || c == '"' || c == '\n' || c == '\r' || static_cast<unsigned char>(c) < 0x20) return false;
  return true;
}

// ---------------------------------------------------------------- libraries

TEST(KernelFamily, LibraryGemmKernelsAreGemm) {
  const std::vector<std::string> names = {
      // cuBLAS on Hopper (as nsys / CUPTI name them: extern "C", not mangled).
      "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__"
      "5x_cublas",
      "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_"
      "cublas",
      "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32_stage4_warpsize2x2x1_tensor16x8x16_kernel",
      "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNT",
      "nvjet_tst_64x64_64x8_2x1_v_bz_splitK_TNT",
      "nvjet_tss_64x8_64x16_2x1_v_bz_splitK_TNT",
      "nvjet_tst_256x96_64x5_2x1_2cta_v_badd_NNT",
      "ampere_bf16_s16816gemm_bf16_256x128_ldg8_f2f_stages_32x3_nn",
      "ampere_bf16_s1688gemm_bf16_128x128_ldg8_f2f_stages_32x1_nn",
      "cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_nn_align8",
      "cutlass3x_sm90_tensorop_h64x128x16gemm_f16_f16_f16_void_f16_128x128x64_1x1x1_0_nnn_align8",
      // CUTLASS kernels inside cuBLAS: mangled and demangled.
      "_ZN7cutlass7Kernel2I66cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_nn_align8EEvNT_6ParamsE",
      "cutlass::Kernel2<cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_nn_align1>",
      // Split-K reduction and cuBLASLt's epilogue.
      "splitKreduce_kernel",
      "_ZN8cublasLt19splitKreduce_kernelILi32ELi16EifEEvv",
      "void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16, float, __nv_bfloat16, false, false, "
      "false>(cublasLt::cublasSplitKParams<float>, __nv_bfloat16 const*, __nv_bfloat16 const*, __nv_bfloat16*, float "
      "const*, float const*, __nv_bfloat16 const*, __nv_bfloat16 const*, __nv_bfloat16*, void*, long, float*, int*)",
      "void cublasLt::epilogue::impl::globalKernel<8, 32, float, float, __nv_bfloat16, true, false, false>(int, int, "
      "long, float*, long, __nv_bfloat16*, long, float const*, float const*)",
      // gemv / small gemm kernels of cuBLAS.
      "void gemv2T_kernel_val<int, int, __nv_bfloat16, __nv_bfloat16, float, float, 128, 16, 4, 4, false, false, "
      "cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<__nv_bfloat16 const>, "
      "cublasGemvTensorStridedBatched<__nv_bfloat16 const>, cublasGemvTensorStridedBatched<__nv_bfloat16>, float> "
      ">(cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<__nv_bfloat16 const>, "
      "cublasGemvTensorStridedBatched<__nv_bfloat16 const>, cublasGemvTensorStridedBatched<__nv_bfloat16>, float>, "
      "float, float)",
      "void gemmk1_kernel<int, float, 256, 5, false, false, false, false, cublasGemvTensorStridedBatched<float const>, "
      "cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>, float, 0>(cublasGemmk1Params<"
      "float, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float const>, "
      "cublasGemvTensorStridedBatched<float>, float, biasType<cublasGemvTensorStridedBatched<float>::value_type, "
      "float>::type>)",
  };
  for (const std::string& n : names) EXPECT_EQ(kernel_family(n), "gemm") << n;
}

TEST(KernelFamily, LibraryShortNames) {
  EXPECT_EQ(kernel_short_name("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNT"), "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNT");
  EXPECT_EQ(kernel_short_name("splitKreduce_kernel"), "splitKreduce_kernel");
  EXPECT_EQ(kernel_short_name("_ZN8cublasLt19splitKreduce_kernelILi32ELi16EifEEvv"), "splitKreduce_kernel");
  EXPECT_EQ(kernel_short_name("void gemv2T_kernel_val<int, int, float>(cublasGemvParamsEx<int, float>, float, float)"),
            "gemv2T_kernel_val");
  EXPECT_EQ(kernel_short_name("void cublasLt::epilogue::impl::globalKernel<8, 32, float>(int, int, long)"),
            "globalKernel");
  // A generic CUTLASS wrapper names its kernel: the template argument, bounded to 60 characters.
  const std::string k2 =
      kernel_short_name("_ZN7cutlass7Kernel2I66cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_nn_align8EEvNT_6ParamsE");
  EXPECT_EQ(k2.size(), kShortNameMax);
  EXPECT_EQ(k2.substr(0, 51), std::string("cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_nn_align8").substr(0, 51));
  EXPECT_EQ(k2[51], '~');
  EXPECT_EQ(kernel_short_name("cutlass::Kernel2<cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_nn_align1>"),
            "cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_nn_align1");
  EXPECT_EQ(kernel_short_name("void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, "
                              "int, int>, cutlass::gemm::collective::CollectiveMma<> > >(cutlass::gemm::kernel::"
                              "GemmUniversal<cute::tuple<int, int, int, int> >::Params)"),
            "GemmUniversal");
  // Long names: bounded, stable, and two names that share their first 51
  // characters stay apart (the hash of the whole name).
  const std::string a = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_"
                        "segment_k_off_kernel__5x_cublas";
  const std::string b = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_"
                        "segment_k_on_kernel__5x_cublas";
  const std::string sa = kernel_short_name(a), sb = kernel_short_name(b);
  EXPECT_EQ(sa.size(), kShortNameMax);
  EXPECT_EQ(sa.substr(0, 51), a.substr(0, 51));
  EXPECT_EQ(sa, kernel_short_name(a));
  EXPECT_NE(sa, sb);
}

// ---------------------------------------------------------------- our kernels

struct Own {
  const char* name;     // the function's name in the source
  const char* family;   // expected family
  const char* mangled;  // one real instantiation, as nvcc 13.0 names it (CUPTI reports this)
};

// Every __global__ of cuda/**/*.cu (baselines/ has none). Files hash their
// anonymous namespace (_GLOBAL__N__<hash>_<file>), so a rebuild may rename
// them; the short name and the family do not depend on it.
const std::vector<Own>& own_kernels() {
  static const std::vector<Own> k = {
      // gret_chunk_v2.cu, gret_chunk_v3.cu, gret_chunk.cu (the segment scan)
      {"gret_chunk_v2_kernel", "gret",
       "_ZN4yoco4cuda49_GLOBAL__N__454c6829_16_gret_chunk_v2_cu_f465202c20gret_chunk_v2_kernelILi128ELi16ELi64ELb0EEEvNS0_"
       "11gret_detail8GretPassE"},
      {"gret_chunk_v3_kernel", "gret",
       "_ZN4yoco4cuda49_GLOBAL__N__fdf00f4c_16_gret_chunk_v3_cu_e5140bc720gret_chunk_v3_kernelILi128ELi64ELb1EEEvNS0_11"
       "gret_detail8GretPassE"},
      // gret_chunk_v5.cu
      {"gret_chunk_v5_kernel", "gret",
       "_ZN4yoco4cuda49_GLOBAL__N__b7404460_16_gret_chunk_v5_cu_4c8d3f0620gret_chunk_v5_kernelILi128ELi256ELb0EEEvNS0_11"
       "gret_detail8GretPassE"},
      // gret_chunk_v6.cu (the name ptxas printed for it)
      {"gret_chunk_v6_kernel", "gret",
       "_ZN4yoco4cuda49_GLOBAL__N__a5f5eb8e_16_gret_chunk_v6_cu_b40500cb20gret_chunk_v6_kernelENS0_11gret_detail8GretPassE"},
      {"gret_chunk_v7_kernel", "gret",
       "_ZN4yoco4cuda49_GLOBAL__N__7a2bceb1_16_gret_chunk_v6_cu_b40500cb20gret_chunk_v7_kernelENS0_11gret_detail8GretPassE"},
      {"gret_segment_scan_kernel", "gret",
       "_ZN4yoco4cuda46_GLOBAL__N__adbfd075_13_gret_chunk_cu_96323d2b24gret_segment_scan_kernelEPKfPfS3_llll"},
      // gret_recurrent.cu
      {"gret_step_generic_kernel", "gret",
       "_ZN4yoco4cuda50_GLOBAL__N__20113284_17_gret_recurrent_cu_55b6e83724gret_step_generic_kernelEPK13__nv_"
       "bfloat16S4_S4_lPKfPfPS2_ll"},
      {"gret_step_sliced_kernel", "gret",
       "_ZN4yoco4cuda50_GLOBAL__N__96a8c19c_17_gret_recurrent_cu_55b6e83723gret_step_sliced_kernelILi128ELi16ELi4ELb1ELNS1"
       "_8StepKindE2EEEvPK13__nv_bfloat16S6_S6_lPKfPfPhPS4_S6_lfli"},
      {"gret_pending_flush_kernel", "gret",
       "_ZN4yoco4cuda50_GLOBAL__N__20113284_17_gret_recurrent_cu_55b6e83725gret_pending_flush_kernelILi128ELi16ELi4EEEvPf"
       "Phi"},
      {"gret_state_update_kernel", "gret",
       "_ZN4yoco4cuda50_GLOBAL__N__96a8c19c_17_gret_recurrent_cu_55b6e83724gret_state_update_kernelILi128ELi16ELi4EEEvPK1"
       "3__nv_bfloat16S5_lPKfPfli"},
      // gret_gate.cu
      {"log_decay_kernel", "gret",
       "_ZN4yoco4cuda45_GLOBAL__N__34d3939e_12_gret_gate_cu_b5c61e1f16log_decay_kernelI13__nv_bfloat16EEvPKT_lllfPf"},
      {"norm_gate_vec_kernel", "norms",
       "_ZN4yoco4cuda45_GLOBAL__N__34d3939e_12_gret_gate_cu_b5c61e1f20norm_gate_vec_kernelILi8EEEvPK13__nv_bfloat16S5_"
       "lllfPS3_"},
      {"norm_gate_d128_kernel", "norms",
       "_ZN4yoco4cuda45_GLOBAL__N__9d075881_12_gret_gate_cu_ff93f86821norm_gate_d128_kernelEPK13__nv_bfloat16S4_"
       "lllfPS2_"},
      {"norm_gate_generic_kernel", "norms",
       "_ZN4yoco4cuda45_GLOBAL__N__34d3939e_12_gret_gate_cu_b5c61e1f24norm_gate_generic_kernelEPK13__nv_bfloat16S4_"
       "llllfPS2_"},
      // gemm_swiglu_sm90.cu
      {"gemm_swiglu_kernel", "gemm",
       "_ZN4yoco4cuda52_GLOBAL__N__ae933f3d_19_gemm_swiglu_sm90_cu_5c8dd1f318gemm_swiglu_kernelILi2EEEvNS1_6ParamsE"},
      // flash_prefill_v1.cu, flash_prefill_v2.cu, flash_prefill_v3.cu
      {"flash_prefill_v1_kernel", "attention_prefill",
       "_ZN4yoco4cuda52_GLOBAL__N__94e5aeb8_19_flash_prefill_v1_cu_f8ed323723flash_prefill_v1_kernelINS1_6TraitsILi128ELi64E"
       "Li4ELi2ELi1EEEEEvNS0_6detail13PrefillParamsE"},
      {"flash_prefill_v2_kernel", "attention_prefill",
       "_ZN4yoco4cuda52_GLOBAL__N__86500156_19_flash_prefill_v2_cu_d8fc4fda23flash_prefill_v2_kernelENS0_6detail13"
       "PrefillParamsE"},
      {"flash_prefill_v3_kernel", "attention_prefill",
       "_ZN4yoco4cuda52_GLOBAL__N__3eec6633_19_flash_prefill_v3_cu_0151b06223flash_prefill_v3_kernelILi2EEEvNS1_6ParamsE"},
      // attention_merge.cu: ring attention's merge of partials, part of the prefill's attention
      {"attention_merge_kernel", "attention_prefill",
       "_ZN4yoco4cuda51_GLOBAL__N__3bc9ed77_18_attention_merge_cu_3a3cd08722attention_merge_kernelEPK13__nv_bfloat16"
       "PKfllllbPfS7_PS2_"},
      // flash_decode.cu
      {"split_kernel", "attention_decode",
       "_ZN4yoco4cuda48_GLOBAL__N__74fb7e9e_15_flash_decode_cu_6cc1c9cd12split_kernelILi128EEEvNS1_11SplitParamsE"},
      {"combine_kernel", "attention_decode",
       "_ZN4yoco4cuda48_GLOBAL__N__74fb7e9e_15_flash_decode_cu_6cc1c9cd14combine_kernelILi128EEEvPKfS4_iP13__nv_"
       "bfloat16"},
      // gemv.cu
      {"gemv_kernel", "gemm",
       "_ZN4yoco4cuda39_GLOBAL__N__aff17ea5_7_gemv_cu_fc68bf4811gemv_kernelILi4ELNS0_7GemvOutE2EEEvPK13__nv_bfloat16lS6_"
       "lPv"},
      // elementwise.cu
      {"embedding_kernel", "norms",
       "_ZN4yoco4cuda47_GLOBAL__N__f794beec_14_elementwise_cu_ea0dd89d16embedding_kernelEPKlPK13__nv_bfloat16lfPf"},
      {"rms_norm_kernel", "norms",
       "_ZN4yoco4cuda47_GLOBAL__N__f794beec_14_elementwise_cu_ea0dd89d15rms_norm_kernelILi4EEEvPfPK13__nv_bfloat16S6_lfPS4_"},
      {"rms_norm_cached_kernel", "norms",
       "_ZN4yoco4cuda47_GLOBAL__N__87c62436_14_elementwise_cu_ea0dd89d22rms_norm_cached_kernelILi4EEEvPfPK13__nv_"
       "bfloat16S6_lfPS4_"},
      {"swiglu_kernel", "norms",
       "_ZN4yoco4cuda47_GLOBAL__N__f794beec_14_elementwise_cu_ea0dd89d13swiglu_kernelILi8EEEvPK13__nv_bfloat16llPS3_"},
      {"rope_kernel", "norms",
       "_ZN4yoco4cuda47_GLOBAL__N__f794beec_14_elementwise_cu_ea0dd89d11rope_kernelIjEEvP13__nv_bfloat16T_llS5_llPKdbd"},
      // cache_ops.cu
      {"rope_at_kernel", "norms",
       "_ZN4yoco4cuda45_GLOBAL__N__7252a07a_12_cache_ops_cu_bf255f1914rope_at_kernelEP13__nv_bfloat16llllPKllPKdbd"},
      {"cache_write_kernel", "other",
       "_ZN4yoco4cuda45_GLOBAL__N__7252a07a_12_cache_ops_cu_bf255f1918cache_write_kernelI5uint4EEvPKT_llllPKlPS4_lll"},
      {"ring_gather_kernel", "other",
       "_ZN4yoco4cuda45_GLOBAL__N__7252a07a_12_cache_ops_cu_bf255f1918ring_gather_kernelItEEvPKT_llllllPS3_ll"},
      {"advance_positions_kernel", "other",
       "_ZN4yoco4cuda45_GLOBAL__N__7252a07a_12_cache_ops_cu_bf255f1924advance_positions_kernelEPlS2_l"},
      {"set_positions_kernel", "other",
       "_ZN4yoco4cuda45_GLOBAL__N__7252a07a_12_cache_ops_cu_bf255f1920set_positions_kernelEPlS2_ll"},
      // counter_init.cu, device_ceilings.cu
      {"counter_init_kernel", "other",
       "_ZN4yoco4cuda48_GLOBAL__N__b2e78d83_15_counter_init_cu_f054081419counter_init_kernelEPflmNS_8InitRuleE"},
      {"counter_init_bf16_kernel", "other",
       "_ZN4yoco4cuda48_GLOBAL__N__b2e78d83_15_counter_init_cu_f054081424counter_init_bf16_kernelEP13__nv_"
       "bfloat16lmNS_8InitRuleE"},
      {"fill_bf16", "other",
       "_ZN4yoco4cuda51_GLOBAL__N__d9404d70_18_device_ceilings_cu_3c340a749fill_bf16EP13__nv_bfloat16xf"},
      // attention_oracle.cu, gret_oracle.cu (the GPU tests' oracles)
      {"gather_rows_kernel", "other",
       "_ZN4yoco4cuda52_GLOBAL__N__72c78d31_19_attention_oracle_cu_4ea0675d18gather_rows_kernelEPK13__nv_bfloat16PKlll"
       "llllPS2_"},
      {"widen_kernel", "other",
       "_ZN4yoco4cuda52_GLOBAL__N__72c78d31_19_attention_oracle_cu_4ea0675d12widen_kernelEPK13__nv_bfloat16lllPf"},
      {"softmax_rows_kernel", "other",
       "_ZN4yoco4cuda52_GLOBAL__N__72c78d31_19_attention_oracle_cu_4ea0675d19softmax_rows_kernelEPflPKlldPd"},
      {"fill_normal_kernel", "other",
       "_ZN4yoco4cuda47_GLOBAL__N__533dc8b7_14_device_fill_cu_d822111718fill_normal_kernelEP13__nv_bfloat16lmf"},
      {"gret_oracle_kernel", "other",
       "_ZN4yoco4cuda47_GLOBAL__N__6440af91_14_gret_oracle_cu_46e24eb618gret_oracle_kernelILi128ELb1EEEvPK13__nv_"
       "bfloat16S5_S5_PKfS7_PfS8_lll"},
  };
  return k;
}

// Kernels that are "other" on purpose: copies, bookkeeping, initialisation, test oracles.
const std::set<std::string> kOtherOnPurpose = {
    "cache_write_kernel", "ring_gather_kernel", "advance_positions_kernel", "set_positions_kernel",
    "counter_init_kernel", "counter_init_bf16_kernel", "fill_bf16", "gather_rows_kernel",
    "widen_kernel", "softmax_rows_kernel", "fill_normal_kernel", "gret_oracle_kernel",
};

TEST(KernelFamily, OwnKernelsByMangledName) {
  for (const Own& k : own_kernels()) {
    EXPECT_NE(demangle(k.mangled).find("yoco::cuda::(anonymous namespace)::"), std::string::npos)
        << k.mangled << " demangles to " << demangle(k.mangled);
    EXPECT_EQ(kernel_short_name(k.mangled), k.name) << k.mangled;
    EXPECT_EQ(kernel_family(k.mangled), k.family) << k.name;
    // The same through the demangled name (what a CUPTI configured to demangle would give).
    EXPECT_EQ(kernel_short_name(demangle(k.mangled)), k.name);
    EXPECT_EQ(kernel_family(demangle(k.mangled)), k.family) << k.name;
    EXPECT_EQ(k.family == std::string("other"), kOtherOnPurpose.count(k.name) == 1) << k.name;
  }
}

TEST(KernelFamily, OwnGenericNamesOnlyInOurNamespace) {
  // flash_decode.cu's split_kernel / combine_kernel are ours only in namespace yoco.
  EXPECT_EQ(kernel_family("void yoco::cuda::(anonymous namespace)::split_kernel<64>(SplitParams)"), "attention_decode");
  EXPECT_EQ(kernel_family("void other_lib::split_kernel<64>(Params)"), "other");
  EXPECT_EQ(kernel_family("combine_kernel"), "other");
  // The other instantiations too.
  EXPECT_EQ(kernel_family("_ZN4yoco4cuda48_GLOBAL__N__74fb7e9e_15_flash_decode_cu_6cc1c9cd12split_kernelILi256EEEvNS1_"
                          "11SplitParamsE"),
            "attention_decode");
  EXPECT_EQ(kernel_short_name("void yoco::cuda::flash_prefill_kernel<128, 64>(float const*, int)"),
            "flash_prefill_kernel");
}

TEST(KernelFamily, UnknownKernelsByName) {
  // A kernel no list names: by what its name says, else other.
  EXPECT_EQ(kernel_family("void yoco::cuda::(anonymous namespace)::gret_new_kernel<64>(int)"), "gret");
  EXPECT_EQ(kernel_family("void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4> >(Params)"),
            "attention_prefill");
  EXPECT_EQ(kernel_family("void vllm::rms_norm_kernel<c10::BFloat16>(c10::BFloat16*)"), "norms");
  EXPECT_EQ(kernel_family("void at::native::reduce_kernel<512, 1>(int)"), "other");
  EXPECT_EQ(kernel_family("memcpy HtoD"), "other");
}

// Every __global__ function in cuda/**/*.cu, cuda/**/*.cuh and baselines/*.cu (read
// from the sources): the list above names each, and names nothing else.
std::filesystem::path source_root() {
#if defined(YOCO_TEST_DATA_DIR)
  return std::filesystem::path(YOCO_TEST_DATA_DIR).parent_path().parent_path();  // tests/data -> the repository
#else
  return std::filesystem::current_path();
#endif
}

std::vector<std::string> global_functions(const std::string& text) {
  std::vector<std::string> out;
  const std::string key = "__global__";
  for (size_t p = text.find(key); p != std::string::npos; p = text.find(key, p + key.size())) {
    const size_t line = text.rfind('\n', p);
    const std::string before = text.substr(line == std::string::npos ? 0 : line + 1, p - (line == std::string::npos ? 0 : line + 1));
    if (before.find("//") != std::string::npos) continue;  // in a comment
    size_t i = p + key.size();
    auto skip_space = [&] {
      while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    };
    auto word = [&] {
      skip_space();
      const size_t s = i;
      while (i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_')) ++i;
      return text.substr(s, i - s);
    };
    for (;;) {
      const std::string w = word();
      if (w == "__launch_bounds__") {
        skip_space();
        int depth = 0;
        do {
          if (text[i] == '(') ++depth;
          if (text[i] == ')') --depth;
          ++i;
        } while (i < text.size() && depth > 0);
        continue;
      }
      if (w == "void" || w == "static" || w == "inline" || w == "__noinline__" || w == "__forceinline__") continue;
      skip_space();
      if (!w.empty() && i < text.size() && text[i] == '(') out.push_back(w);
      break;
    }
  }
  return out;
}

TEST(KernelFamily, EveryGlobalInTheSourcesIsListed) {
  const std::filesystem::path root = source_root();
  if (!std::filesystem::is_directory(root / "cuda")) GTEST_SKIP() << "no sources at " << root;
  std::set<std::string> found;
  int files = 0;
  for (const char* dir : {"cuda", "baselines"}) {
    if (!std::filesystem::is_directory(root / dir)) continue;
    for (const auto& e : std::filesystem::recursive_directory_iterator(root / dir)) {
      const std::string ext = e.path().extension().string();
      if (ext != ".cu" && ext != ".cuh") continue;
      std::ifstream in(e.path());
      std::stringstream ss;
      ss << in.rdbuf();
      ++files;
      for (const std::string& f : global_functions(ss.str())) found.insert(f);
    }
  }
  ASSERT_GT(files, 5);
  std::set<std::string> listed;
  for (const Own& k : own_kernels()) listed.insert(k.name);
  for (const std::string& f : found) {
    EXPECT_EQ(listed.count(f), 1u) << "__global__ " << f
                                   << " is in the sources but not in this test's list (and perhaps not in "
                                      "kernel_family.cpp's): give it a family";
    // Its family through a demangled name, as CUPTI would report it.
    const std::string fam = kernel_family("void yoco::cuda::(anonymous namespace)::" + f + "(int)");
    if (!kOtherOnPurpose.count(f)) {
      EXPECT_NE(fam, "other") << f;
    }
  }
  for (const std::string& l : listed) EXPECT_EQ(found.count(l), 1u) << l << " is listed but no longer in the sources";
}

// ---------------------------------------------------------------- short names

TEST(KernelShortName, Rules) {
  EXPECT_EQ(kernel_short_name("memcpy HtoD"), "memcpy HtoD");
  EXPECT_EQ(kernel_short_name("memset"), "memset");
  EXPECT_EQ(kernel_short_name("rms_norm_kernel(float*, int)"), "rms_norm_kernel");
  EXPECT_EQ(kernel_short_name("a::b::c"), "c");
  EXPECT_EQ(kernel_short_name("weird,\"name\"\nwith\tbad"), "weird__name__with_bad");
  EXPECT_EQ(kernel_short_name(""), "(unnamed)");
  // Not a valid mangling: kept (sanitised).
  EXPECT_EQ(demangle("_Znot_a_name"), "_Znot_a_name");
  EXPECT_EQ(kernel_short_name("_Znot_a_name"), "_Znot_a_name");
}

TEST(KernelShortName, AlwaysCsvSafeAndBounded) {
  std::mt19937 rng(1234);
  const std::string alphabet = "abc_:<>(), \"'\n\r\t{}#~0123456789_Z";
  for (int t = 0; t < 5000; ++t) {
    std::string s;
    const int len = static_cast<int>(rng() % 120);
    for (int i = 0; i < len; ++i) s += alphabet[rng() % alphabet.size()];
    if (t % 7 == 0) s = "_Z" + s;
    const std::string sn = kernel_short_name(s);
    EXPECT_FALSE(sn.empty()) << s;
    EXPECT_LE(sn.size(), kShortNameMax) << s;
    EXPECT_TRUE(csv_safe(sn)) << s << " -> " << sn;
    const std::string f = kernel_family(s);
    EXPECT_TRUE(std::find(kernel_families().begin(), kernel_families().end(), f) != kernel_families().end());
  }
}

// ---------------------------------------------------------------- aggregation

ActivityRecord rec(const std::string& name, uint64_t start, uint64_t dur, ActivityKind kind = ActivityKind::kernel) {
  ActivityRecord r;
  r.name = name;
  r.start_ns = start;
  r.end_ns = start + dur;
  r.kind = kind;
  return r;
}

const char* kSplit128 =
    "_ZN4yoco4cuda48_GLOBAL__N__74fb7e9e_15_flash_decode_cu_6cc1c9cd12split_kernelILi128EEEvNS1_11SplitParamsE";
const char* kSplit256 =
    "_ZN4yoco4cuda48_GLOBAL__N__74fb7e9e_15_flash_decode_cu_6cc1c9cd12split_kernelILi256EEEvNS1_11SplitParamsE";
const char* kNorm =
    "_ZN4yoco4cuda47_GLOBAL__N__f794beec_14_elementwise_cu_ea0dd89d15rms_norm_kernelILi4EEEvPfPK13__nv_bfloat16S6_lfPS4_";
const char* kGemm = "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNT";

TEST(KernelAggregation, PerUnitTimesFamiliesAndMerging) {
  std::vector<ActivityRecord> r;
  // Two units (decode steps): per step 2 GEMMs of 10 us, a split_kernel<128>
  // of 4 us and one <256> of 2 us (one short name), a norm of 1 us.
  for (int u = 0; u < 2; ++u) {
    const uint64_t t = 1000000 * (u + 1);
    r.push_back(rec(kGemm, t, 10000));
    r.push_back(rec(kGemm, t + 20000, 10000));
    r.push_back(rec(kSplit128, t + 40000, 4000));
    r.push_back(rec(kSplit256, t + 50000, 2000));
    r.push_back(rec(kNorm, t + 60000, 1000));
  }
  r.push_back(rec("memcpy HtoD", 5000000, 3000, ActivityKind::memcpy));
  ActivityRecord untimed = rec(kNorm, 0, 0);
  r.push_back(untimed);

  const KernelBreakdown b = aggregate_kernel_times(r, 2);
  EXPECT_EQ(b.units, 2);
  EXPECT_EQ(b.records, 12);
  EXPECT_EQ(b.untimed, 1);
  EXPECT_NEAR(b.seconds_per_unit, (2 * (20000 + 6000 + 1000) + 3000) * 1e-9 / 2, 1e-15);
  EXPECT_DOUBLE_EQ(b.launches_per_unit, 6.0);

  ASSERT_EQ(b.kernels.size(), 4u);
  EXPECT_EQ(b.kernels[0].short_name, kGemm);
  EXPECT_EQ(b.kernels[0].family, "gemm");
  EXPECT_NEAR(b.kernels[0].seconds_per_unit, 20e-6, 1e-15);
  EXPECT_DOUBLE_EQ(b.kernels[0].launches_per_unit, 2.0);
  EXPECT_EQ(b.kernels[1].short_name, "split_kernel");  // both instantiations merged
  EXPECT_EQ(b.kernels[1].family, "attention_decode");
  EXPECT_NEAR(b.kernels[1].seconds_per_unit, 6e-6, 1e-15);
  EXPECT_EQ(b.kernels[1].launches, 4);
  EXPECT_EQ(b.kernels[2].short_name, "memcpy HtoD");
  EXPECT_EQ(b.kernels[2].family, "other");
  EXPECT_NEAR(b.kernels[2].seconds_per_unit, 1.5e-6, 1e-15);
  EXPECT_DOUBLE_EQ(b.kernels[2].launches_per_unit, 0.5);
  EXPECT_EQ(b.kernels[3].short_name, "rms_norm_kernel");
  EXPECT_EQ(b.kernels[3].launches, 3);  // the untimed record counts as a launch of 0 s
  EXPECT_NEAR(b.kernels[3].seconds_per_unit, 1e-6, 1e-15);

  // Every family, zeros included, longest first; ties in the canonical order.
  ASSERT_EQ(b.families.size(), 6u);
  const std::vector<std::string> order = {"gemm", "attention_decode", "other", "norms", "gret", "attention_prefill"};
  for (size_t i = 0; i < order.size(); ++i) EXPECT_EQ(b.families[i].family, order[i]) << i;
  EXPECT_NEAR(b.families[0].seconds_per_unit, 20e-6, 1e-15);
  EXPECT_EQ(b.families[0].kernels, 1);
  EXPECT_DOUBLE_EQ(b.families[0].launches_per_unit, 2.0);
  EXPECT_EQ(b.families[4].seconds_per_unit, 0.0);
  EXPECT_EQ(b.families[4].kernels, 0);
  double fam_sum = 0;
  for (const FamilyTime& f : b.families) fam_sum += f.seconds_per_unit;
  EXPECT_NEAR(fam_sum, b.seconds_per_unit, 1e-15);
}

TEST(KernelAggregation, EmptyAndBadUnits) {
  const KernelBreakdown b = aggregate_kernel_times({}, 3);
  EXPECT_TRUE(b.kernels.empty());
  EXPECT_EQ(b.families.size(), 6u);
  EXPECT_EQ(b.seconds_per_unit, 0.0);
  EXPECT_THROW(aggregate_kernel_times({}, 0), std::invalid_argument);
  const KernelCut c = cut_kernels(b);
  EXPECT_TRUE(c.kept.empty());
  EXPECT_FALSE(c.has_rest);
}

TEST(KernelAggregation, CutAt999Permille) {
  std::vector<ActivityRecord> r;
  // 1000 us of GEMM, 100 us of norm, then 10 tiny kernels of 0.01 us each ... 0.1 us total.
  r.push_back(rec(kGemm, 1000, 1000000));
  r.push_back(rec(kNorm, 2000000, 100000));
  for (int i = 0; i < 10; ++i) r.push_back(rec("tiny_kernel_" + std::to_string(i), 3000000 + 100 * i, 10));
  r.push_back(rec("memset", 4000000, 10, ActivityKind::memset));
  const KernelBreakdown b = aggregate_kernel_times(r, 1);
  const KernelCut c = cut_kernels(b, 0.999);
  // gemm is 90.9%, gemm + norm 99.99%: both kept, the tiny ones merged.
  ASSERT_EQ(c.kept.size(), 2u);
  EXPECT_EQ(c.kept[0].short_name, kGemm);
  EXPECT_EQ(c.kept[1].short_name, "rms_norm_kernel");
  ASSERT_TRUE(c.has_rest);
  EXPECT_EQ(c.rest.short_name, "(rest)");
  EXPECT_EQ(c.rest_kernels, 11);
  EXPECT_EQ(c.rest.launches, 11);
  EXPECT_EQ(c.rest.family, "other");
  EXPECT_NEAR(c.rest.seconds_per_unit, 110e-9, 1e-18);
  double sum = c.rest.seconds_per_unit;
  for (const KernelTime& k : c.kept) sum += k.seconds_per_unit;
  EXPECT_NEAR(sum, b.seconds_per_unit, 1e-15);
  // Fraction 1: nothing merged.
  EXPECT_FALSE(cut_kernels(b, 1.0).has_rest);
  // A rest of several families is "mixed".
  r.push_back(rec(kSplit128, 5000000, 10));
  const KernelCut m = cut_kernels(aggregate_kernel_times(r, 1), 0.999);
  ASSERT_TRUE(m.has_rest);
  EXPECT_EQ(m.rest.family, "mixed");
}

}  // namespace
}  // namespace yoco::cli

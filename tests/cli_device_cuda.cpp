// test_cli: --device cuda (what it refuses, whatever the build and the
// machine, and a run where both have CUDA) and the small presets it serves.
#include <dlfcn.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cli_fixture.hpp"
#include "config.hpp"
#include "cuda_status.hpp"

namespace yoco_test {
namespace {

TEST_F(Cli, SmallPresetsRunOnTheReference) {
  // The smallest shapes the CUDA kernels serve: head dim 64, GQA group 2.
  const auto y = yoco::preset_config("yoco-small"), s = yoco::preset_config("yoco-swa-small"),
             t = yoco::preset_config("transformer-small");
  for (const auto* c : {&y, &s, &t}) {
    EXPECT_EQ(c->dim, 256) << c->name;
    EXPECT_EQ(c->n_layers, 4) << c->name;
    EXPECT_EQ(c->n_attn_heads, 4) << c->name;
    EXPECT_EQ(c->n_attn_kv_heads, 2) << c->name;
    EXPECT_EQ(c->attn_head_dim(), 64) << c->name;
    EXPECT_EQ(c->hidden_dim, 768) << c->name;
    EXPECT_EQ(c->vocab_size, 4096) << c->name;
  }
  EXPECT_EQ(y.self_head_dim(), 64);
  EXPECT_EQ(y.self_decoder(), yoco::SelfDecoderKind::gret);
  EXPECT_EQ(s.window(), 128);
  EXPECT_FALSE(t.is_yoco());
  for (const std::string model : {"yoco-small", "yoco-swa-small", "transformer-small"}) {
    const std::string out = path(model + ".npy");
    const CliRun r = yoco("forward --model " + model + " --tokens 1,2,3,4095 --out " + out);
    ASSERT_EQ(r.status, 0) << model << "\n" << r.all();
    EXPECT_EQ(read_npy(out).shape, (std::vector<int64_t>{4096})) << model;
  }
}

TEST_F(Cli, DeviceCudaOptions) {
  const std::string o = " --out " + path("cuda.npy");
  const std::string fwd = "forward --model yoco-small --tokens 1,2,3 --device cuda";
  // What only the CPU reference has: said whatever the build and the machine.
  expect_input_error(yoco(fwd + " --dtype f64" + o), {"--dtype", "bf16", "--device cpu"}, "forward --dtype");
  expect_input_error(yoco(fwd + " --paradigm recurrent" + o), {"--paradigm", "--device cpu"}, "forward --paradigm");
  expect_input_error(yoco(fwd + " --chunk 64" + o), {"--chunk", "--device cpu"}, "forward --chunk");
  expect_input_error(yoco("forward --model yoco-small --tokens 1 --device gpu" + o), {"--device", "gpu"}, "device gpu");
  const std::string gen = "generate --model transformer-small --prompt-len 8 --gen 2 --device cuda";
  expect_input_error(yoco(gen + " --dtype f32"), {"--dtype", "bf16", "--device cpu"}, "generate --dtype");
  expect_input_error(yoco(gen + " --check"), {"--check", "--device cpu"}, "generate --check");
  expect_input_error(yoco("bench --device cuda --dtype f64 --model yoco-small --lengths 1K"),
                     {"--dtype", "bf16", "--device cpu"}, "bench --dtype");
  // The default job runs on the GPU when there is one; asked for without one it says why.
  if (!yoco::cli::cuda_status().device)
    expect_input_error(yoco("bench --device cuda --default-job --no-report"), {"--device cuda"}, "bench default job");
  expect_input_error(yoco("bench --device cpu --quick"), {"--quick", "GPU"}, "bench --quick on the CPU");
  // The default job's own file: a plain .csv name (checked before anything runs), the default job only.
  for (const std::string bad : {"../x.csv", "a/b.csv", "x.txt", ".csv", ".hidden.csv"})
    expect_input_error(yoco("bench --default-job --no-report --sweep-file " + bad), {"--sweep-file", bad},
                       "bench --sweep-file " + bad);
  expect_input_error(yoco("bench --model yoco-tiny --lengths 1K --sweep-file x.csv"),
                     {"--sweep-file", "default job only"}, "bench --sweep-file outside the default job");
  expect_input_error(yoco("bench --cupti --lengths 4K"), {"--cupti", "--device cuda"}, "bench --cupti on the CPU");
  expect_input_error(yoco("bench --cupti --no-cupti"), {"--cupti and --no-cupti"}, "bench both");

  // Without CUDA in the build, or without a device: exit 2 saying which; with both, it runs.
  const CliRun f = yoco(fwd + o);
  const CliRun g = yoco(gen);
  if (f.status == 0) {
    const Npy n = read_npy(path("cuda.npy"));
    EXPECT_EQ(n.descr, "<f4");
    EXPECT_EQ(n.shape, (std::vector<int64_t>{4096}));
    EXPECT_NE(f.out.find("bf16 weights and caches on "), std::string::npos) << f.out;
    ASSERT_EQ(g.status, 0) << g.all();
    EXPECT_NE(g.out.find("bf16 weights and caches on "), std::string::npos) << g.out;
    EXPECT_NE(g.out.find("seq 0:"), std::string::npos) << g.out;
  } else {
    expect_input_error(f, {"--device cuda: "}, "forward without CUDA");
    expect_input_error(g, {"--device cuda: "}, "generate without CUDA");
#if !defined(YOCO_HAVE_CUDA)
    EXPECT_NE(f.err.find("built without CUDA"), std::string::npos) << f.err;
    EXPECT_NE(f.err.find("cuda preset"), std::string::npos) << f.err;
#else
    EXPECT_NE(f.err.find("no CUDA device"), std::string::npos) << f.err;
    // Without a driver the runtime's own words ("driver version is insufficient") sent users after an upgrade.
    if (void* libcuda = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
      ::dlclose(libcuda);
    } else {
      EXPECT_NE(f.err.find("no NVIDIA driver found"), std::string::npos) << f.err;
      EXPECT_EQ(f.err.find("insufficient"), std::string::npos) << f.err;
    }
#endif
  }
}

// A command that runs on the CPU maps no cuBLAS: loading it cost every yoco process ~110 ms (its static
// constructors touch ~200 MB), and the GPU paths now open it at their first call (cuda/device/cublas_loader).
TEST_F(Cli, ACpuCommandLoadsNoCublas) {
  // glibc's loader names every library it maps on stderr under LD_DEBUG=files.
  const CliRun r = shell("LD_DEBUG=files " + shell_quote(YOCO_CLI_PATH) + " model --model yoco-tiny --lengths 1K");
  ASSERT_EQ(r.status, 0) << r.all();
  ASSERT_NE(r.err.find("file="), std::string::npos) << "LD_DEBUG gave no trace: " << r.err.substr(0, 400);
  EXPECT_EQ(r.err.find("libcublas"), std::string::npos) << r.err.substr(0, 4000);
}

}  // namespace
}  // namespace yoco_test

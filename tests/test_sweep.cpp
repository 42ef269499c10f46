// The measured protocol (bench/harness/sweep.cpp) driven through a fake device
// backend: a runner that only advances a fake clock, a timer that reads it,
// and memory readings and a usable memory chosen by each test. The protocol's
// rules -- warm-up and repeats, the sampled decode, the automatic batch, the
// budget cuts, out-of-memory rows, the analytic row beside each point -- are
// tested here once, whatever the device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <optional>
#include <stdexcept>

#include "analytic_rows.hpp"
#include "attention/cache_plan.hpp"
#include "cuda_backend.hpp"
#include "errors.hpp"
#include "format.hpp"
#include "host_memory.hpp"
#include "sweep.hpp"

namespace yoco::cli {
namespace {

struct Log {
  double now = 0;  // the fake clock, seconds
  int creates = 0, prefills = 0, resets = 0;
  int allocations = 0;  // one-token prompts: the throughput's batch search and skipped-prompt caches
  std::vector<int64_t> allocated_batches, allocated_lengths;
  bool oom_always = false;  // every prefill runs out of memory
  double per_layer = 0;     // > 0: each layer adds this fraction of the base time
  int64_t decode_steps = 0, skipped = 0;
  std::vector<int64_t> step_positions;  // the cache position each decode step wrote
  std::vector<int64_t> prefill_caps;    // each synthetic prefill's cache capacity (prompt + room)
  int64_t oom_above_batch = 0;          // > 0: a prefill of a larger batch runs out of memory
  // A device runner's buffers: a prefill whose (batch, capacity) differs from its generation's
  // allocates, as the CUDA runners do; the timer's region says whether that happened inside it.
  bool timing = false;
  int reserves = 0, timed_allocations = 0;
};

// What a device's allocation failure looks like (cuda::DeviceOutOfMemory).
class BatchBadAlloc : public std::bad_alloc {
 public:
  const char* what() const noexcept override { return "activations: self qkvg: 9.000 GB of activations did not fit"; }
};

// A prefill costs kPrefillPerToken per token of the batch, a decode step
// kStep per sequence: exact, so every timing row is known in advance.
constexpr double kPrefillPerToken = 1e-4, kStep = 2e-3;

class FakeRunner : public ModelRunner {
 public:
  FakeRunner(ModelConfig cfg, Log& log) : cfg_(std::move(cfg)), log_(log) {}
  const ModelConfig& config() const override { return cfg_; }
  Precision precision() const override { return Precision::f32; }
  Mat<double> forward(const TokenBatch&, GretParadigm) const override { throw std::logic_error("not in a sweep"); }
  Mat<double> prefill(const TokenBatch& prompt, int64_t max_new_tokens, int64_t prefill_chunk) override {
    // The sweep's own prompts of token 1 (the batch search, skipped-prompt
    // caches) are allocations; synthetic prompts are prefills.
    const bool allocation = std::all_of(prompt.ids.begin(), prompt.ids.end(), [](int64_t t) { return t == 1; });
    if (allocation) {
      ++log_.allocations;
      log_.allocated_batches.push_back(prompt.batch);
      log_.allocated_lengths.push_back(prompt.length);
    }
    if (log_.oom_always || (log_.oom_above_batch > 0 && prompt.batch > log_.oom_above_batch)) {
      generation_ = {0, 0};  // as the CUDA runners: the generation dropped, the scratch cleared
      step_rows_ = step_batch_ = 0;
      throw BatchBadAlloc();
    }
    if (hold(prompt.batch, prompt.length, max_new_tokens, prefill_chunk)) log_.timed_allocations += log_.timing;
    if (!allocation) {
      ++log_.prefills;
      log_.prefill_caps.push_back(prompt.length + max_new_tokens);
    }
    log_.now += kPrefillPerToken * static_cast<double>(prompt.batch * prompt.length) * layer_factor();
    batch_ = prompt.batch;
    pos_ = prompt.length;
    cap_ = prompt.length + max_new_tokens;
    return Mat<double>::Zero(batch_, cfg_.vocab_size);
  }
  Mat<double> decode_step(const std::vector<int64_t>& tokens) override {
    EXPECT_EQ(static_cast<int64_t>(tokens.size()), batch_);
    EXPECT_LT(pos_, cap_) << "a decode step past the cache the prefill sized";
    ++log_.decode_steps;
    log_.step_positions.push_back(pos_++);
    log_.now += kStep * static_cast<double>(batch_) * layer_factor();
    return Mat<double>::Zero(batch_, cfg_.vocab_size);
  }
  void reserve_generation(int64_t batch, int64_t length, int64_t max_new_tokens, int64_t prefill_chunk) override {
    EXPECT_FALSE(log_.timing) << "a reservation inside the timer";
    ++log_.reserves;
    if (log_.oom_always || (log_.oom_above_batch > 0 && batch > log_.oom_above_batch)) {
      generation_ = {0, 0};
      step_rows_ = step_batch_ = 0;
      throw BatchBadAlloc();  // where the prefill would run out of memory, its reservation does
    }
    hold(batch, length, max_new_tokens, prefill_chunk);
    pos_ = cap_ = 0;  // the generation in progress is dropped
  }
  void skip_positions(int64_t n) override {
    log_.skipped += n;
    pos_ += n;
  }
  MemoryBreakdown memory() const override { return {}; }
  int64_t position() const override { return pos_; }
  int64_t capacity() const override { return cap_; }

 private:
  // The buffers a prefill of this shape needs, allocated where not held (true then): the
  // generation's, kept only for the same (batch, capacity), and a step's working set, kept while
  // large enough (the runners' Scratch).
  bool hold(int64_t batch, int64_t length, int64_t max_new_tokens, int64_t prefill_chunk) {
    bool allocated = false;
    if (std::pair(batch, length + max_new_tokens) != generation_) {
      generation_ = {batch, length + max_new_tokens};
      allocated = true;
    }
    const int64_t rows = batch * cuda::cache_plan::prefill_tokens_per_sequence(prefill_chunk, batch, length);
    if (rows > step_rows_ || batch > step_batch_) {
      step_rows_ = std::max(step_rows_, rows);
      step_batch_ = std::max(step_batch_, batch);
      allocated = true;
    }
    return allocated;
  }
  // 1 unless the test makes time grow with depth: what runs once plus each layer.
  double layer_factor() const { return 1 + log_.per_layer * static_cast<double>(cfg_.n_layers); }
  ModelConfig cfg_;
  Log& log_;
  int64_t batch_ = 0, pos_ = 0, cap_ = 0;
  std::pair<int64_t, int64_t> generation_{0, 0};  // (batch, capacity) of the buffers held
  int64_t step_rows_ = 0, step_batch_ = 0;         // the step working set's
};

class FakeBackend : public DeviceBackend {
 public:
  Log log;
  double usable = 1e18;           // bytes the sweep may fill
  double bytes_per_token = 1000;  // generation_bytes = batch x tokens x this
  bool throw_bad_alloc = false;
  bool bytes_per_layer = false;   // generation_bytes also x n_layers
  bool profiler = false;          // has_kernel_profiler
  std::vector<std::string> profiled;  // the phases kernel_breakdown was called for
  std::string fail_phase;             // kernel_breakdown throws for this phase
  cost::DeviceSpec spec{"fake roofline", 1e12, 1e11, 0, "test"};

  Provenance provenance() const override { return Provenance::here("fake", "fake device", "fake driver"); }
  Ceilings measure_ceilings(Progress&) override {
    return {{{"gemm_peak_tflops", 1.0, "TFLOP/s", "measured", 3, "fake GEMM", 0.9, 1.1}}, spec};
  }
  cost::Storage analytic_storage(Precision) const override { return cost::Storage::uniform(cost::StorageType::fp32); }
  double usable_memory_bytes() const override { return usable; }
  std::string usable_memory_name() const override { return "fake memory"; }
  double generation_bytes(const ModelConfig& cfg, Precision, double batch, double prompt, double gen,
                          double) const override {
    return batch * (prompt + gen) * bytes_per_token * (bytes_per_layer ? static_cast<double>(cfg.n_layers) : 1.0);
  }
  bool has_kernel_profiler() const override { return profiler; }
  std::vector<PhaseReading> kernel_breakdown(const std::string& phase, const std::function<void()>& region,
                                             int64_t units, double timed_s) override {
    profiled.push_back(phase);
    if (phase == fail_phase) throw std::runtime_error("CUPTI delivered no kernel records");
    const double t = time(region) / static_cast<double>(units);
    return {{phase + ".gemm", {"gpu_time_s", 0.75 * t, "s", "measured", units, "fake kernels", {}, {}}},
            {phase + ":fake_kernel", {"kernel_time_s", 0.25 * t, "s", "measured", units, "family other", {}, {}}},
            {phase + ".kernels", {"cupti_overhead_fraction", t / timed_s - 1, "fraction", "measured", units, "", {}, {}}}};
  }
  std::unique_ptr<ModelRunner> create_runner(const ModelConfig& cfg, Precision, uint64_t) override {
    ++log.creates;
    if (throw_bad_alloc) throw std::bad_alloc();
    return std::make_unique<FakeRunner>(cfg, log);
  }
  double time(const std::function<void()>& region) override {
    const double t0 = log.now;
    log.timing = true;
    region();
    log.timing = false;
    return log.now - t0;
  }
  void reset_peak_memory() override { ++log.resets; }
  std::vector<Reading> memory_breakdown(const ModelRunner&, int64_t n, Precision) override {
    return {{"mem_total_bytes", 100.0 * static_cast<double>(n), "B", "exact", 1, "fake accounting", {}, {}},
            {"mem_kv_cache_bytes", 10.0 * static_cast<double>(n), "B", "exact", 1, "fake cache", {}, {}}};
  }
  std::vector<Reading> memory_peaks() override {
    return {{"mem_device_peak_bytes", 7.0, "B", "measured", 1, "fake peak", {}, {}}};
  }
};

SweepSettings settings() {
  SweepSettings s;
  s.models = {"yoco-tiny"};
  s.lengths = {1024};
  s.gen = 256;
  s.decode_sample = 32;
  s.max_batch = 4;
  s.repeats = 3;
  s.warmup = 1;
  s.budget_s = 1e9;
  return s;
}

std::vector<ResultRow> sweep(const SweepSettings& s, FakeBackend& dev) {
  Progress progress(static_cast<int>(s.models.size() * s.lengths.size()));
  return run_sweep(s, dev, progress);
}

// The one row of (phase, metric) of the measured device; fails when not exactly one.
const ResultRow& row(const std::vector<ResultRow>& rows, const std::string& phase, const std::string& metric) {
  const ResultRow* found = nullptr;
  int count = 0;
  for (const auto& r : rows)
    if (r.prov.device == "fake" && r.phase == phase && r.metric == metric) {
      found = &r;
      ++count;
    }
  if (count != 1)
    throw std::runtime_error("expected one " + phase + "/" + metric + " row, got " + std::to_string(count));
  return *found;
}

// A row of a temporary would dangle: name the rows first.
const ResultRow& row(std::vector<ResultRow>&& rows, const std::string& phase, const std::string& metric) = delete;

int analytic_rows_of(const std::vector<ResultRow>& rows, int64_t n) {
  int count = 0;
  for (const auto& r : rows) count += r.method == "analytic" && r.seq_len == n && r.prov.device_name == "fake roofline";
  return count;
}

TEST(SweepProtocol, MeasuresEveryPhaseThroughTheBackend) {
  FakeBackend dev;
  const auto rows = sweep(settings(), dev);

  const ResultRow& g = row(rows, "ceiling", "gemm_peak_tflops");
  EXPECT_EQ(g.value, 1.0);
  EXPECT_EQ(g.min, 0.9);
  EXPECT_EQ(g.prov.device_name, "fake device");
  EXPECT_GT(analytic_rows_of(rows, 1024), 0) << "the analytic row beside the point";

  // Latency at batch 1: 1 warm-up + 3 timed prefills, then 32 decode steps.
  const ResultRow& p = row(rows, "prefill", "prefill_latency_s");
  EXPECT_EQ(p.method, "measured");
  EXPECT_EQ(p.repeats, 3);
  EXPECT_DOUBLE_EQ(*p.value, kPrefillPerToken * 1024);
  EXPECT_NE(p.notes.find("after 1 warm-up"), std::string::npos) << p.notes;
  const ResultRow& d = row(rows, "decode", "decode_step_latency_s");
  EXPECT_DOUBLE_EQ(*d.value, kStep);
  EXPECT_EQ(d.repeats, 32);

  // Memory: the backend's readings, breakdown first, then its peaks.
  EXPECT_EQ(dev.log.resets, 1);
  EXPECT_EQ(*row(rows, "memory", "mem_total_bytes").value, 100.0 * 1024);
  EXPECT_EQ(row(rows, "memory", "mem_total_bytes").method, "exact");
  EXPECT_EQ(*row(rows, "memory", "mem_device_peak_bytes").value, 7.0);
  // KV bytes per token: the cache reading over the cache's capacity (the first
  // timed prefill's: exactly the prompt, no decode room).
  const ResultRow& kv = row(rows, "kv_cache", "kv_cache_bytes_per_token");
  EXPECT_EQ(*kv.value, 10.0);
  EXPECT_EQ(kv.unit, "B/token");
  EXPECT_EQ(kv.seq_len, 1024);

  // Throughput: automatic batch = max_batch (everything fits); 256 > 32 steps,
  // so 16 steps at the start, 16 at the end, the 224 between skipped.
  const ResultRow& t = row(rows, "throughput", "throughput_tokens_per_s");
  EXPECT_EQ(t.batch, 4);
  EXPECT_EQ(t.gen_tokens, 256);
  EXPECT_EQ(t.method, "sampled");
  EXPECT_NE(t.notes.find("decode sampled: 16 steps at the start and 16 at the end of 256"), std::string::npos)
      << t.notes;
  EXPECT_EQ(dev.log.skipped, 256 - 32);
  ASSERT_EQ(dev.log.step_positions.size(), 32u + 32u);
  for (int64_t i = 0; i < 16; ++i) {
    EXPECT_EQ(dev.log.step_positions[32 + i], 768 + i) << "the first half of the sample: the generation's start";
    EXPECT_EQ(dev.log.step_positions[48 + i], 1008 + i) << "the second half: the generation's end";
  }
  const double prefill_s = kPrefillPerToken * 4 * (1024 - 256), decode_s = kStep * 4 * 256;
  EXPECT_NEAR(*t.value, 4.0 * 256 / (prefill_s + decode_s), 1e-9 * *t.value);
  EXPECT_EQ(*row(rows, "throughput", "max_batch").value, 4.0);

  EXPECT_EQ(dev.log.creates, 1);
  EXPECT_EQ(dev.log.prefills, 1 + 3 + 1);
  EXPECT_EQ(dev.log.allocated_batches, std::vector<int64_t>{4}) << "the automatic batch, allocated once: it fits";
  EXPECT_NE(row(rows, "throughput", "max_batch").notes.find("confirmed by allocating it"), std::string::npos);
  EXPECT_EQ(dev.log.decode_steps, 32 + 32);
}

// Every row of a run carries the time it started (reports/SCHEMA.md), the analytic rows too, although
// they are made after the ceilings are measured.
TEST(SweepProtocol, EveryRowCarriesTheRunsStartTime) {
  struct StartedLongAgo : FakeBackend {
    Provenance provenance() const override {
      Provenance p = FakeBackend::provenance();
      p.timestamp = "2000-01-01T00:00:00Z";
      return p;
    }
  } dev;
  const auto rows = sweep(settings(), dev);
  ASSERT_GT(analytic_rows_of(rows, 1024), 0);
  for (const auto& r : rows) EXPECT_EQ(r.prov.timestamp, "2000-01-01T00:00:00Z") << r.prov.device << " " << r.phase;
}

TEST(SweepProtocol, GenerationWithinTheSampleIsTimedInFull) {
  FakeBackend dev;
  SweepSettings s = settings();
  s.metrics = {"throughput"};
  s.gen = 16;
  const auto rows = sweep(s, dev);
  const ResultRow& t = row(rows, "throughput", "throughput_tokens_per_s");
  EXPECT_EQ(t.method, "measured");
  EXPECT_NE(t.notes.find("every decode step timed"), std::string::npos) << t.notes;
  EXPECT_EQ(dev.log.skipped, 0);
  EXPECT_EQ(dev.log.decode_steps, 16);
  EXPECT_EQ(dev.log.resets, 0) << "no latency phase, no memory readings";
}

TEST(SweepProtocol, AutomaticBatchIsTheLargestThatFits) {
  FakeBackend dev;
  SweepSettings s = settings();
  s.metrics = {"throughput"};
  // batch x 1024 tokens x 1000 B: 2 sequences fit in 2.5 MB, 3 do not.
  dev.usable = 2.5e6;
  const auto rows = sweep(s, dev);
  const ResultRow& b = row(rows, "throughput", "max_batch");
  EXPECT_EQ(*b.value, 2.0);
  EXPECT_NE(b.notes.find("largest batch <= --max-batch 4 that fits in fake memory"), std::string::npos) << b.notes;
}

TEST(SweepProtocol, PointThatDoesNotFitIsOutOfMemoryRows) {
  FakeBackend dev;
  dev.usable = 1000;  // not one sequence
  const auto rows = sweep(settings(), dev);
  EXPECT_EQ(dev.log.creates, 0) << "nothing is allocated for a point that cannot fit";
  for (const auto& [phase, metric] : std::vector<std::pair<std::string, std::string>>{
           {"memory", "mem_total_bytes"},
           {"prefill", "prefill_latency_s"},
           {"decode", "decode_step_latency_s"},
           {"throughput", "throughput_tokens_per_s"}}) {
    const ResultRow& r = row(rows, phase, metric);
    EXPECT_EQ(r.method, "out_of_memory") << metric;
    EXPECT_FALSE(r.value.has_value()) << metric;
    EXPECT_NE(r.notes.find("fake memory is"), std::string::npos) << r.notes;
    EXPECT_NE(r.notes.find("the analytic row beside is the projection"), std::string::npos) << r.notes;
  }
  EXPECT_GT(analytic_rows_of(rows, 1024), 0) << "the projection stays when the point does not run";
}

TEST(SweepProtocol, BadAllocDuringTheRunIsOutOfMemory) {
  FakeBackend dev;
  dev.throw_bad_alloc = true;
  SweepSettings s = settings();
  s.metrics = {"prefill"};
  const auto rows = sweep(s, dev);
  const ResultRow& r = row(rows, "prefill", "prefill_latency_s");
  EXPECT_EQ(r.method, "out_of_memory");
  EXPECT_NE(r.notes.find("std::bad_alloc during the run"), std::string::npos) << r.notes;
}

// The first point of a model is predicted by the roofline on the backend's
// device: the same analytic projection the sweep writes beside the point.
AnalyticPoint predicted_point(const SweepSettings& s, const FakeBackend& dev, int64_t batch, int64_t tp_batch) {
  AnalyticSettings a;
  a.storage = dev.analytic_storage(s.precision);
  a.device = dev.spec;
  a.prefill_chunk = s.prefill_chunk;
  a.gen = s.gen;
  a.batch = batch;
  a.tp_batch = tp_batch;
  return analytic_point(resolve_model(s.models[0]), s.lengths[0], a);
}

double predicted_prefill_s(const SweepSettings& s, const FakeBackend& dev) {
  return predicted_point(s, dev, 1, 0).prefill_s;
}

TEST(SweepProtocol, BudgetDropsTheWarmupAndCutsRepeats) {
  FakeBackend dev;
  SweepSettings s = settings();
  s.metrics = {"prefill"};
  const double pre = predicted_prefill_s(s, dev);
  ASSERT_GT(pre, 0);
  s.budget_s = 2.5 * pre;  // 1 + 3 prefills predicted 4 x pre: no warm-up, 2 repeats fit
  const auto rows = sweep(s, dev);
  const ResultRow& p = row(rows, "prefill", "prefill_latency_s");
  EXPECT_EQ(p.method, "measured");
  EXPECT_EQ(p.repeats, 2);
  EXPECT_NE(p.notes.find("repeats cut to 2, no warm-up"), std::string::npos) << p.notes;
  EXPECT_EQ(dev.log.prefills, 2);
}

TEST(SweepProtocol, PointOverTheBudgetEvenCutIsAnOverBudgetRow) {
  FakeBackend dev;
  SweepSettings s = settings();
  s.metrics = {"prefill"};
  s.budget_s = 0.5 * predicted_prefill_s(s, dev);
  const auto rows = sweep(s, dev);
  const ResultRow& p = row(rows, "prefill", "prefill_latency_s");
  EXPECT_EQ(p.method, "over_budget");
  EXPECT_FALSE(p.value.has_value());
  EXPECT_EQ(dev.log.creates, 0);
  EXPECT_GT(analytic_rows_of(rows, 1024), 0);
  // The notes' numbers say why: rounded to whole seconds, "predicted 1 s > --budget-s 1" would not.
  auto says_over = [](const std::string& notes, const std::string& what) {
    const size_t at = notes.find(what);
    ASSERT_NE(at, std::string::npos) << what << " in: " << notes;
    const size_t over = notes.find(" s > --budget-s ", at);
    ASSERT_NE(over, std::string::npos) << notes;
    const double predicted = std::stod(notes.substr(at + what.size()));
    const double budget = std::stod(notes.substr(over + std::strlen(" s > --budget-s ")));
    EXPECT_GT(predicted, budget) << notes;
  };
  says_over(p.notes, "predicted ");
  s.models = {"transformer-3b"};  // enough layer units for the probes, and they too over the budget
  s.budget_s = 1e-9;
  FakeBackend deep;
  const auto deep_rows = sweep(s, deep);
  const ResultRow& d = row(deep_rows, "prefill", "prefill_latency_s");
  EXPECT_EQ(d.method, "over_budget");
  says_over(d.notes, "predicted ");
  says_over(d.notes, "the probes are predicted to take ");
}

// Incremental output and --resume (issue 12): the sweep hands every row so far
// to the caller after each point, and an earlier run's rows let it skip the
// points already done.
SweepSettings two_by_two() {
  SweepSettings s = settings();
  s.models = {"yoco-tiny", "transformer-tiny"};
  s.lengths = {512, 1024};
  return s;
}

std::vector<ResultRow> sweep_io(const SweepSettings& s, FakeBackend& dev, const SweepIo& io) {
  Progress progress(static_cast<int>(s.models.size() * s.lengths.size()));
  return run_sweep(s, dev, progress, io);
}

// Everything but the time of day the rows were made; values to 9 digits (the
// fake clock is a running sum: a time read later differs in the last bits).
std::string row_text(const ResultRow& r) {
  auto v = [](std::optional<double> x) { return x ? strf("%.9g", *x) : std::string("-"); };
  return r.prov.device + "|" + r.prov.device_name + "|" + result_key(r) + "|" + v(r.value) + "|" + r.unit + "|" +
         r.method + "|" + std::to_string(r.repeats) + "|" + v(r.min) + "|" + v(r.max) + "|" + r.notes;
}

// The same rows in the same order; the first difference named.
void expect_same_rows(const std::vector<ResultRow>& got, const std::vector<ResultRow>& want) {
  EXPECT_EQ(got.size(), want.size());
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i)
    if (row_text(got[i]) != row_text(want[i])) {
      ADD_FAILURE() << "row " << i << ":\n  got  " << row_text(got[i]) << "\n  want " << row_text(want[i]);
      return;
    }
}

struct Stop {};  // what a kill between points looks like to the caller

// The rows a run interrupted after `points` points left on disk.
std::vector<ResultRow> interrupted_after(const SweepSettings& s, int points) {
  FakeBackend dev;
  std::vector<ResultRow> on_disk;
  SweepIo io;
  io.on_point = [&](const std::vector<ResultRow>& rows, int done) {
    on_disk = rows;
    if (done == points) throw Stop{};
  };
  EXPECT_THROW(sweep_io(s, dev, io), Stop);
  return on_disk;
}

TEST(SweepProtocol, EveryPointHandsOverTheRowsSoFar) {
  const SweepSettings s = two_by_two();
  FakeBackend dev;
  std::vector<std::vector<ResultRow>> snapshots;
  std::vector<int> done;
  SweepIo io;
  io.on_point = [&](const std::vector<ResultRow>& rows, int points_done) {
    snapshots.push_back(rows);
    done.push_back(points_done);
  };
  const auto rows = sweep_io(s, dev, io);
  EXPECT_EQ(done, (std::vector<int>{1, 2, 3, 4}));
  for (size_t i = 0; i < snapshots.size(); ++i) {
    // Each snapshot is the start of the final rows: the ceilings, then whole points, in order.
    ASSERT_LE(snapshots[i].size(), rows.size());
    if (i) {
      EXPECT_GT(snapshots[i].size(), snapshots[i - 1].size());
    }
    const auto& last = snapshots[i].back();
    EXPECT_EQ(last.model, s.models[i / 2]);
    EXPECT_EQ(last.seq_len, s.lengths[i % 2]);
    for (size_t k = 0; k < snapshots[i].size(); ++k) EXPECT_EQ(row_text(snapshots[i][k]), row_text(rows[k]));
  }
  // After the last point only the ratio rows, which need every point, are added.
  for (size_t k = snapshots.back().size(); k < rows.size(); ++k)
    EXPECT_NE(rows[k].model.find(" vs "), std::string::npos) << row_text(rows[k]);
  // Without a caller, the same rows.
  FakeBackend plain;
  expect_same_rows(sweep(s, plain), rows);
}

TEST(SweepProtocol, ResumeSkipsCompletedPointsAndEndsWithTheRowsOfAFullRun) {
  const SweepSettings s = two_by_two();
  FakeBackend full_dev;
  const auto full = sweep(s, full_dev);
  for (int stopped_after : {1, 2, 3}) {
    SCOPED_TRACE("interrupted after " + std::to_string(stopped_after) + " points");
    const std::vector<ResultRow> on_disk = interrupted_after(s, stopped_after);
    FakeBackend dev;
    SweepIo io;
    io.previous = &on_disk;
    io.previous_file = "f.csv";
    std::string note;
    io.note = [&](const std::string& n) { note = n; };
    std::vector<int> done;
    io.on_point = [&](const std::vector<ResultRow>&, int d) { done.push_back(d); };
    const auto rows = sweep_io(s, dev, io);
    EXPECT_EQ(note, "resuming: " + std::to_string(stopped_after) + " of 4 points done in f.csv");
    EXPECT_EQ(done, (std::vector<int>{1, 2, 3, 4}));
    // Only the missing points ran: latency 1 + 3 prefills and 1 throughput prefill each.
    EXPECT_EQ(dev.log.prefills, 5 * (4 - stopped_after));
    EXPECT_EQ(dev.log.creates, stopped_after >= 2 ? 1 : 2) << "a model whose points are all kept is not created";
    // The fake clock makes the timings exact: the rows are those of the full run.
    expect_same_rows(rows, full);
  }
  // A finished file resumes to itself, nothing measured.
  FakeBackend dev;
  SweepIo io;
  io.previous = &full;
  expect_same_rows(sweep_io(s, dev, io), full);
  EXPECT_EQ(dev.log.prefills, 0);
}

// The ceilings are measured anew by the resumed run, and the analytic rows
// (roofline times) follow from them: a kept point's analytic rows made under
// the earlier run's ceilings would disagree with the file's ceiling rows, and
// an analytic ratio would divide times of two rooflines.
TEST(SweepProtocol, ResumeGivesEveryAnalyticRowTheCeilingsOfThisRun) {
  const SweepSettings s = two_by_two();
  const std::vector<ResultRow> on_disk = interrupted_after(s, 3);  // the default fake roofline
  FakeBackend faster;
  faster.spec.peak_flops *= 4;
  faster.spec.bandwidth *= 2;
  const auto full = sweep(s, faster);
  FakeBackend dev;
  dev.spec = faster.spec;
  SweepIo io;
  io.previous = &on_disk;
  const auto rows = sweep_io(s, dev, io);
  EXPECT_EQ(dev.log.prefills, 5) << "only the missing point ran";
  std::vector<ResultRow> analytic_got, analytic_want;
  for (const auto& r : rows)
    if (r.method == "analytic") analytic_got.push_back(r);
  for (const auto& r : full)
    if (r.method == "analytic") analytic_want.push_back(r);
  expect_same_rows(analytic_got, analytic_want);
}

// The automatic throughput batch comes from the free memory, which moves a
// little from machine to machine: a resumed sweep keeps the file's batch, and
// a point whose run failed runs again.
TEST(SweepProtocol, ResumeKeepsThePlannedBatchAndRetriesFailedPhases) {
  SweepSettings s = settings();
  s.max_batch = 9;
  FakeBackend first;
  first.usable = 3.5 * 1024 * first.bytes_per_token;  // 3 sequences of 1024 tokens fit
  const auto full = sweep(s, first);
  ASSERT_EQ(row(full, "throughput", "throughput_tokens_per_s").batch, 3);
  std::vector<ResultRow> previous;
  for (auto r : full) {
    if (r.prov.device == "fake" && r.phase == "throughput") continue;  // the throughput did not finish
    if (r.prov.device == "fake" && r.phase == "decode") {
      r.method = "failed";  // and the decode failed
      r.value.reset();
    }
    previous.push_back(r);
  }
  FakeBackend more;
  more.usable = 4.5 * 1024 * more.bytes_per_token;  // 4 fit here
  SweepIo io;
  io.previous = &previous;
  io.previous_file = "f.csv";
  const auto rows = sweep_io(s, more, io);
  const ResultRow& t = row(rows, "throughput", "throughput_tokens_per_s");
  EXPECT_EQ(t.batch, 3) << "the file's plan";
  EXPECT_NE(row(rows, "throughput", "max_batch").notes.find("batch 3 planned by the run resumed from f.csv"),
            std::string::npos);
  EXPECT_EQ(row(rows, "decode", "decode_step_latency_s").method, "measured") << "the failed phase ran again";
}

TEST(SweepProtocol, ResumeWritesTheKeptPointsAheadToo) {
  // While the first point is measured again, the file must not lose the points after it.
  const SweepSettings s = two_by_two();
  FakeBackend full_dev;
  const auto full = sweep(s, full_dev);
  std::vector<ResultRow> previous;
  for (const auto& r : full)
    if (!(r.model == "yoco-tiny" && r.seq_len == 512 && r.phase == "decode" && r.prov.device == "fake"))
      previous.push_back(r);  // the first point lacks its decode row: it runs again
  FakeBackend dev;
  SweepIo io;
  io.previous = &previous;
  std::vector<std::vector<ResultRow>> snapshots;
  io.on_point = [&](const std::vector<ResultRow>& rows, int) { snapshots.push_back(rows); };
  const auto rows = sweep_io(s, dev, io);
  EXPECT_EQ(dev.log.prefills, 5) << "the incomplete point only";
  expect_same_rows(rows, full);
  ASSERT_EQ(snapshots.size(), 4u);
  EXPECT_EQ(snapshots[0].size(), snapshots[3].size()) << "every point is on disk after the first";
}

TEST(SweepProtocol, ResumeRefusesRowsOfAnotherConfiguration) {
  const SweepSettings s = two_by_two();
  const std::vector<ResultRow> on_disk = interrupted_after(s, 2);
  auto refused = [&](const SweepSettings& now, const std::vector<ResultRow>& previous,
                     const std::vector<std::string>& needles) {
    FakeBackend dev;
    SweepIo io;
    io.previous = &previous;
    io.previous_file = "earlier.csv";
    try {
      sweep_io(now, dev, io);
      ADD_FAILURE() << "resumed a file of another configuration";
    } catch (const InputError& e) {
      const std::string what = e.what();
      for (const auto& n : needles) EXPECT_NE(what.find(n), std::string::npos) << n << " in: " << what;
      EXPECT_NE(what.find("earlier.csv"), std::string::npos) << what;
    }
    EXPECT_EQ(dev.log.prefills, 0) << "refused before any point runs";
  };
  // Another device name.
  std::vector<ResultRow> other_device = on_disk;
  for (auto& r : other_device)
    if (r.prov.device == "fake") r.prov.device_name = "another device";
  refused(s, other_device, {"another device", "fake device", "--device-name"});
  // Another --gen: the throughput rows' gen_tokens and the analytic projection differ.
  SweepSettings gen = s;
  gen.gen = 128;
  refused(gen, on_disk, {"other settings", "--gen"});
  // Another --batch.
  SweepSettings batch = s;
  batch.batch = 2;
  refused(batch, on_disk, {"other settings", "--batch"});
  // Other metrics.
  SweepSettings metrics = s;
  metrics.metrics = {"prefill"};
  refused(metrics, on_disk, {"other settings", "--metrics"});
  // Another --max-batch (--batch auto): the file's points and this run's would
  // run the throughput at batches that no full run mixes.
  for (int64_t cap : {2, 8}) {
    SCOPED_TRACE("--max-batch " + std::to_string(cap));
    SweepSettings max_batch = s;
    max_batch.max_batch = cap;
    refused(max_batch, on_disk, {"other settings", "--max-batch 4", "--max-batch " + std::to_string(cap)});
  }
  // A point outside --model x --lengths.
  SweepSettings fewer = s;
  fewer.lengths = {1024};
  refused(fewer, on_disk, {"yoco-tiny at 512", "not a point of this sweep"});
  // More lengths than the file is fine: the new points run.
  SweepSettings more = s;
  more.lengths = {512, 1024, 2048};
  FakeBackend dev;
  SweepIo io;
  io.previous = &on_disk;
  sweep_io(more, dev, io);
  EXPECT_EQ(dev.log.prefills, 5 * 4);
}

TEST(SweepProtocol, CudaBackendSaysWhatItLacks) {
  // Complete with CUDA; without it (the cpu preset) one entry that says so
  // (and `yoco bench --device cuda` refuses with exit 2, tested in test_bench).
#if defined(YOCO_HAVE_CUDA)
  EXPECT_TRUE(cuda_backend_missing().empty());
#else
  const auto missing = cuda_backend_missing();
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_NE(missing[0].find("cuda preset"), std::string::npos) << missing[0];
#endif
}

// A device that adds decode steps (as the CUDA backend does): one untimed
// warm-up step before each run of timed steps, and rows of its own after a
// latency point's timed steps, from `extra` more steps.
class ExtrasBackend : public FakeBackend {
 public:
  int64_t warmup = 1, extra = 4;
  int extras_calls = 0;
  int64_t decode_warmup_steps() const override { return warmup; }
  int64_t decode_extra_steps() const override { return extra; }
  std::vector<PhaseReading> decode_extras(ModelRunner& runner, int64_t batch) override {
    ++extras_calls;
    std::vector<double> t;
    for (int64_t i = 0; i < extra; ++i)
      t.push_back(time([&] { runner.run_decode_step(std::vector<int64_t>(static_cast<size_t>(batch), 1)); }));
    return {{"decode_eager", {"decode_step_latency_s", t.front(), "s", "measured", extra, "fake eager", {}, {}}},
            {"decode", {"decode_host_enqueue_s", 1e-6, "s", "measured", 32, "fake enqueue", {}, {}}}};
  }
};

// A device that runs asynchronously (as CUDA does): each timed region also
// has a host time, here a tenth of the device's.
class AsyncBackend : public FakeBackend {
 public:
  std::optional<double> host;
  double time(const std::function<void()>& region) override {
    const double t = FakeBackend::time(region);
    host = t / 10;
    return t;
  }
  std::optional<double> last_region_host_s() const override { return host; }
};

TEST(SweepProtocol, AnAsynchronousDeviceAddsThePrefillsHostTime) {
  AsyncBackend dev;
  const auto rows = sweep(settings(), dev);
  const ResultRow& p = row(rows, "prefill", "prefill_latency_s");
  const ResultRow& h = row(rows, "prefill", "prefill_host_enqueue_s");
  EXPECT_EQ(h.repeats, p.repeats) << "the same timed runs, the warm-up left out";
  EXPECT_NEAR(*h.value, *p.value / 10, 1e-12 * *p.value);
  EXPECT_EQ(h.method, "measured");
  EXPECT_NE(h.notes.find("host"), std::string::npos) << h.notes;
  FakeBackend sync;
  for (const ResultRow& r : sweep(settings(), sync))
    EXPECT_NE(r.metric, "prefill_host_enqueue_s") << "a device whose regions are the host's own has no such row";
}

TEST(SweepProtocol, DeviceDecodeWarmupAndExtrasHaveRoomAndRows) {
  ExtrasBackend dev;
  const auto rows = sweep(settings(), dev);
  EXPECT_EQ(dev.extras_calls, 1) << "after the latency point's timed steps only";
  // Latency: the warm-up step at 1024, 32 timed steps, 4 extra steps; the
  // FakeRunner fails any step past the cache the prefill sized.
  ASSERT_EQ(dev.log.step_positions.size(), (1u + 32u + 4u) + (1u + 32u));
  EXPECT_EQ(dev.log.step_positions[0], 1024);
  EXPECT_EQ(dev.log.step_positions[1], 1025) << "the first timed step follows the warm-up";
  EXPECT_EQ(dev.log.step_positions[36], 1060) << "the last extra step";
  const ResultRow& d = row(rows, "decode", "decode_step_latency_s");
  EXPECT_EQ(d.repeats, 32);
  EXPECT_NE(d.notes.find("steps at context 1025..1056 after 1 untimed warm-up step"), std::string::npos) << d.notes;
  // The device's rows, each in its phase, before the decode row.
  const ResultRow& e = row(rows, "decode_eager", "decode_step_latency_s");
  EXPECT_EQ(e.notes, "fake eager");
  EXPECT_EQ(e.batch, 1);
  EXPECT_EQ(row(rows, "decode", "decode_host_enqueue_s").notes, "fake enqueue");
  EXPECT_LT(&e, &d) << "a reader taking a point's last decode_step_latency_s gets the decode phase's";
  // Throughput: the prefill reserves the warm-up step, which is not timed.
  const ResultRow& t = row(rows, "throughput", "throughput_tokens_per_s");
  EXPECT_NE(t.notes.find("after 1 untimed warm-up decode step"), std::string::npos) << t.notes;
  EXPECT_EQ(dev.log.step_positions[37], 768) << "throughput's warm-up step";
  EXPECT_EQ(dev.log.step_positions[38], 769) << "then the sample's first half";
  const double prefill_s = kPrefillPerToken * 4 * (1024 - 256), decode_s = kStep * 4 * 256;
  EXPECT_NEAR(*t.value, 4.0 * 256 / (prefill_s + decode_s), 1e-9 * *t.value) << "the warm-up step is not timed";
}

TEST(SweepProtocol, ResumeKeepsTheDeviceDecodeRows) {
  const SweepSettings s = two_by_two();
  ExtrasBackend full_dev;
  const auto full = sweep(s, full_dev);
  // A finished file resumes to itself: decode_eager rows belong to --metrics decode.
  ExtrasBackend dev;
  SweepIo io;
  io.previous = &full;
  expect_same_rows(sweep_io(s, dev, io), full);
  EXPECT_EQ(dev.log.prefills, 0);
  // An interrupted file: the missing points run, the kept ones keep their device rows.
  const auto on_disk = [&] {
    ExtrasBackend d;
    std::vector<ResultRow> kept;
    SweepIo stop;
    stop.on_point = [&](const std::vector<ResultRow>& rows, int done) {
      kept = rows;
      if (done == 2) throw Stop{};
    };
    EXPECT_THROW(sweep_io(s, d, stop), Stop);
    return kept;
  }();
  ExtrasBackend dev2;
  SweepIo io2;
  io2.previous = &on_disk;
  expect_same_rows(sweep_io(s, dev2, io2), full);
  EXPECT_EQ(dev2.log.prefills, 5 * 2);
}

// A device's out-of-memory error (cuda::DeviceOutOfMemory is a std::bad_alloc)
// says what did not fit; the sweep keeps its words.
class TellingBadAlloc : public std::bad_alloc {
 public:
  const char* what() const noexcept override { return "kv_cache: global K/V: 120.000 GB of kv_cache did not fit"; }
};

class TellingBackend : public FakeBackend {
 public:
  std::unique_ptr<ModelRunner> create_runner(const ModelConfig&, Precision, uint64_t) override {
    throw TellingBadAlloc();
  }
};

TEST(SweepProtocol, BadAllocThatSaysWhatDidNotFitKeepsItsMessage) {
  TellingBackend dev;
  SweepSettings s = settings();
  s.metrics = {"prefill"};
  const auto rows = sweep(s, dev);
  const ResultRow& r = row(rows, "prefill", "prefill_latency_s");
  EXPECT_EQ(r.method, "out_of_memory");
  EXPECT_NE(r.notes.find("120.000 GB of kv_cache did not fit"), std::string::npos) << r.notes;
  EXPECT_EQ(r.notes.find("std::bad_alloc"), std::string::npos) << r.notes;
}

// The throughput run is the one at a larger batch: when the batch the memory
// model chose does not fit, a binary search by allocation finds the largest
// that does, and the rows say so; the point's other rows stand.
TEST(SweepProtocol, ThroughputBatchThatDoesNotFitIsSearchedByAllocation) {
  FakeBackend dev;
  dev.log.oom_above_batch = 2;
  SweepSettings s = settings();
  s.max_batch = 9;  // the memory model says 9 fit; 3 and above do not
  const auto rows = sweep(s, dev);
  EXPECT_EQ(row(rows, "memory", "mem_total_bytes").method, "exact");
  EXPECT_EQ(row(rows, "prefill", "prefill_latency_s").method, "measured");
  const ResultRow& t = row(rows, "throughput", "throughput_tokens_per_s");
  EXPECT_EQ(t.batch, 2);
  ASSERT_TRUE(t.value.has_value());
  const double prefill_s = kPrefillPerToken * 2 * (1024 - 256), decode_s = kStep * 2 * 256;
  EXPECT_NEAR(*t.value, 2.0 * 256 / (prefill_s + decode_s), 1e-9 * *t.value);
  const ResultRow& b = row(rows, "throughput", "max_batch");
  EXPECT_EQ(*b.value, 2.0);
  EXPECT_EQ(b.batch, 2);
  EXPECT_NE(b.notes.find("batch 9 did not fit when allocated, a binary search by allocation found 2"),
            std::string::npos) << b.notes;
  // 9 fails, then the search between 0 and 9: 4 fails, 2 fits, 3 fails.
  EXPECT_EQ(dev.log.allocated_batches, (std::vector<int64_t>{9, 4, 2, 3}));
  // Each allocation holds one prefill step: chunk / batch tokens of each sequence, at most the prompt.
  EXPECT_EQ(dev.log.allocated_lengths, (std::vector<int64_t>{768, 768, 768, 768}));
  SweepSettings small_chunk = s;
  small_chunk.prefill_chunk = 1000;
  FakeBackend dev2;
  dev2.log.oom_above_batch = 2;
  sweep(small_chunk, dev2);
  EXPECT_EQ(dev2.log.allocated_lengths, (std::vector<int64_t>{111, 250, 500, 333}));
}

// When not even one sequence fits, the throughput row says so with the
// device's words, and the point's other rows stand.
TEST(SweepProtocol, ThroughputOutOfMemoryKeepsTheLatencyRows) {
  FakeBackend dev;
  SweepSettings s = settings();
  s.metrics = {"memory", "prefill"};
  const auto latency = sweep(s, dev);
  EXPECT_EQ(row(latency, "prefill", "prefill_latency_s").method, "measured");
  // The same point with throughput only, on a device where nothing more fits.
  FakeBackend full;
  full.log.oom_always = true;
  s.metrics = {"throughput"};
  const auto rows = sweep(s, full);
  const ResultRow& t = row(rows, "throughput", "throughput_tokens_per_s");
  EXPECT_EQ(t.method, "out_of_memory");
  EXPECT_FALSE(t.value.has_value());
  EXPECT_EQ(t.batch, 4);
  EXPECT_NE(t.notes.find("not even one sequence's generation fits"), std::string::npos) << t.notes;
  for (const auto& r : rows) EXPECT_FALSE(r.prov.device == "fake" && r.metric == "max_batch") << "no batch ran";
  // With the batch given there is no search: the device's own words.
  FakeBackend dev2;
  dev2.log.oom_above_batch = 1;
  s.batch = 4;
  s.metrics = {"throughput"};
  const std::vector<ResultRow> rows2 = sweep(s, dev2);
  const ResultRow& t2 = row(rows2, "throughput", "throughput_tokens_per_s");
  EXPECT_EQ(t2.method, "out_of_memory");
  EXPECT_NE(t2.notes.find("9.000 GB of activations did not fit (throughput at batch 4)"), std::string::npos)
      << t2.notes;
  EXPECT_EQ(dev2.log.allocations, 0);
}

// A point too large for the device: its prefill and decode come from the
// model cut to 1 and 2 layer units, and are exact when every layer of a kind
// costs the same (the fake: what runs once + n_layers equal layers).
TEST(SweepProtocol, PointThatDoesNotFitIsExtrapolatedFromLayerProbes) {
  FakeBackend dev;
  dev.log.per_layer = 0.5;
  dev.bytes_per_layer = true;
  SweepSettings s = settings();
  s.models = {"yoco-3b", "transformer-3b"};  // 26 layers: 13 units of a self + a cross layer; 26 of one layer
  s.metrics = {"memory", "prefill", "decode"};
  // The full models (26 layers) do not fit; the probes (YOCO 4 layers, the Transformer 2) do.
  dev.usable = 1.0 * (1024 + 32 + 1) * dev.bytes_per_token * 10;
  const auto rows = sweep(s, dev);
  for (const std::string model : {"yoco-3b", "transformer-3b"}) {
    SCOPED_TRACE(model);
    auto find = [&](const std::string& phase, const std::string& metric) {
      for (const auto& r : rows)
        if (r.prov.device == "fake" && r.model == model && r.phase == phase && r.metric == metric) return r;
      throw std::runtime_error("no " + phase + " " + metric);
    };
    const ResultRow p = find("prefill", "prefill_latency_s");
    EXPECT_EQ(p.method, "extrapolated");
    EXPECT_NEAR(*p.value, kPrefillPerToken * 1024 * (1 + 0.5 * 26), 1e-9);
    EXPECT_EQ(p.repeats, 3);
    EXPECT_NE(p.notes.find("extrapolated from the model cut to 1 and 2 layer units"), std::string::npos) << p.notes;
    EXPECT_NE(p.notes.find(model == "yoco-3b" ? "t(1) + 12 x (t(2) - t(1)) for 13 units"
                                              : "t(1) + 25 x (t(2) - t(1)) for 26 units"),
              std::string::npos) << p.notes;
    EXPECT_NE(p.notes.find("the full model: out_of_memory, needs about"), std::string::npos) << p.notes;
    const ResultRow d = find("decode", "decode_step_latency_s");
    EXPECT_EQ(d.method, "extrapolated");
    EXPECT_NEAR(*d.value, kStep * (1 + 0.5 * 26), 1e-12);
    EXPECT_EQ(find("memory", "mem_total_bytes").method, "out_of_memory") << "the full model's memory is not measured";
  }
  EXPECT_EQ(dev.log.creates, 4) << "two probes per model, never the full model";
}

TEST(SweepProtocol, ProbesThatDoNotSeparateOrAreRefusedLeaveTheSkipRows) {
  SweepSettings s = settings();
  s.models = {"transformer-3b"};
  s.metrics = {"prefill"};
  {
    FakeBackend dev;  // per_layer 0: depth costs nothing, the probes take the same time
    dev.bytes_per_layer = true;
    dev.usable = 1.0 * (1024 + 1) * dev.bytes_per_token * 10;
    const std::vector<ResultRow> probe_rows = sweep(s, dev);
    const ResultRow& p = row(probe_rows, "prefill", "prefill_latency_s");
    EXPECT_EQ(p.method, "out_of_memory");
    EXPECT_FALSE(p.value.has_value());
    EXPECT_NE(p.notes.find("the probes do not separate"), std::string::npos) << p.notes;
  }
  {
    FakeBackend dev;  // not even the probes fit
    dev.log.per_layer = 0.5;
    dev.bytes_per_layer = true;
    dev.usable = 1.0 * (1024 + 1) * dev.bytes_per_token;
    const std::vector<ResultRow> probe_rows = sweep(s, dev);
    const ResultRow& p = row(probe_rows, "prefill", "prefill_latency_s");
    EXPECT_EQ(p.method, "out_of_memory");
    EXPECT_NE(p.notes.find("not extrapolated: the 2-unit probe needs about"), std::string::npos) << p.notes;
    EXPECT_EQ(dev.log.creates, 0);
  }
  {
    FakeBackend dev;  // --no-extrapolate
    dev.log.per_layer = 0.5;
    dev.bytes_per_layer = true;
    dev.usable = 1.0 * (1024 + 1) * dev.bytes_per_token * 10;
    SweepSettings off = s;
    off.extrapolate = false;
    const std::vector<ResultRow> probe_rows = sweep(off, dev);
    const ResultRow& p = row(probe_rows, "prefill", "prefill_latency_s");
    EXPECT_EQ(p.method, "out_of_memory");
    EXPECT_EQ(p.notes.find("extrapolat"), std::string::npos) << p.notes;
    EXPECT_EQ(dev.log.creates, 0);
  }
}

// A throughput whose batch prefill would take over a quarter of the budget:
// one sequence's prefill timed and multiplied, the decode on the batch's
// caches moved to the prompt's length by skipping.
TEST(SweepProtocol, LongThroughputPrefillIsSampledOnOneSequence) {
  FakeBackend dev;
  SweepSettings s = settings();
  s.metrics = {"throughput"};
  const double pre = predicted_prefill_s(s, dev);
  const double batch_prefill = 4 * pre * (1024.0 - 256) / 1024;
  s.budget_s = 2 * batch_prefill;
  const auto rows = sweep(s, dev);
  const ResultRow& t = row(rows, "throughput", "throughput_tokens_per_s");
  EXPECT_EQ(t.method, "sampled");
  EXPECT_EQ(t.batch, 4);
  EXPECT_NE(t.notes.find("prefill sampled: one sequence of 768 tokens timed"), std::string::npos) << t.notes;
  const double prefill_s = 4 * kPrefillPerToken * 768, decode_s = kStep * 4 * 256;
  EXPECT_NEAR(*t.value, 4.0 * 256 / (prefill_s + decode_s), 1e-9 * *t.value);
  EXPECT_EQ(dev.log.prefills, 1 + 1) << "an untimed warm-up (no latency prefill ran), then one sequence, not the batch";
  EXPECT_NE(t.notes.find("after an untimed warm-up prefill of one sequence"), std::string::npos) << t.notes;
  EXPECT_EQ(dev.log.allocated_batches, (std::vector<int64_t>{4, 4})) << "the batch allocated, then its caches";
  EXPECT_EQ(dev.log.allocated_lengths, (std::vector<int64_t>{768, 1})) << "a prefill step's worth, then one token";
  EXPECT_EQ(dev.log.skipped, (768 - 1) + (256 - 32)) << "to the prompt's length, then the sampled decode's gap";
  ASSERT_EQ(dev.log.step_positions.size(), 32u);
  EXPECT_EQ(dev.log.step_positions.front(), 768) << "the first step at the prompt's length";
}

// A fixed --batch N: the decode step predicted for the throughput is the batch's once. The latency
// batch's step (already N sequences) was multiplied by N again, so transformer-tiny at 4K with --batch
// 128 was predicted 6.2 s and left over_budget at --budget-s 5 for a decode of 0.14 s.
TEST(SweepProtocol, AFixedBatchsThroughputDecodeIsCountedOnce) {
  FakeBackend dev;
  SweepSettings s = settings();
  s.metrics = {"throughput"};
  s.batch = 8;
  const AnalyticPoint ap = predicted_point(s, dev, 8, 8);
  const double full = ap.prefill_s * (1024.0 - 256) / 1024, step = ap.decode_s;  // the batch's prefill, one step
  ASSERT_GT(step, 0);
  s.budget_s = full + 64 * step;
  const double prefill_part = full > s.budget_s / 4 ? full / 8 : full;  // one sequence timed when long
  ASSERT_LE(prefill_part + 32 * step, s.budget_s) << "the batch's 32 sampled steps fit";
  ASSERT_GT(prefill_part + 32 * step * 8, s.budget_s) << "the batch counted twice would not";
  const auto rows = sweep(s, dev);
  const ResultRow& t = row(rows, "throughput", "throughput_tokens_per_s");
  EXPECT_EQ(t.method, "sampled") << t.notes;
  EXPECT_EQ(t.batch, 8);
  EXPECT_TRUE(t.value.has_value());
}

// The latency runs and the throughput each fit the budget, not together: the
// throughput runs under a budget of its own (the Transformer's 512K point on an
// H100 lost its throughput to the sum), and the latency repeats are not cut.
TEST(SweepProtocol, ThroughputThatFitsOnlyAloneGetsABudgetOfItsOwn) {
  FakeBackend dev;
  SweepSettings s = settings();
  s.metrics = {"prefill", "throughput"};
  s.max_batch = 1;
  const double pre = predicted_prefill_s(s, dev);
  s.budget_s = 4.2 * pre;  // 1 + 3 prefills fit; with the throughput's 0.75 x pre they do not
  const auto rows = sweep(s, dev);
  const ResultRow& p = row(rows, "prefill", "prefill_latency_s");
  EXPECT_EQ(p.method, "measured");
  EXPECT_EQ(p.repeats, 3);
  EXPECT_EQ(p.notes.find("repeats cut"), std::string::npos) << p.notes;
  const ResultRow& t = row(rows, "throughput", "throughput_tokens_per_s");
  EXPECT_EQ(t.method, "sampled");  // its decode: 32 of the 256 steps
  ASSERT_TRUE(t.value.has_value());
  EXPECT_NE(t.notes.find("timed under a --budget-s of its own"), std::string::npos) << t.notes;
  EXPECT_EQ(dev.log.prefills, 4 + 1) << "the latency's warm-up and repeats, then the throughput's one sequence";
}

// No timed prefill holds an allocation: the last repeat's decode room, the throughput's batch after
// the batch search, its one sequence sampled after the batch's caches, the probes' last repeat, a
// first repeat with no warm-up before it: each is reserved before the timer starts. (Without the
// reservation each of these allocated inside it.)
TEST(SweepProtocol, NoTimedPrefillAllocates) {
  for (const bool sampled : {false, true}) {
    FakeBackend dev;
    dev.profiler = true;
    SweepSettings s = settings();
    s.cupti = true;
    if (sampled) {
      s.metrics = {"prefill", "decode", "throughput"};
      s.budget_s = 2 * 4 * predicted_prefill_s(s, dev) * (1024.0 - 256) / 1024;
    }
    const auto rows = sweep(s, dev);
    EXPECT_EQ(row(rows, "prefill", "prefill_latency_s").repeats, 3) << sampled;
    if (sampled) {
      EXPECT_NE(row(rows, "throughput", "throughput_tokens_per_s").notes.find("prefill sampled"), std::string::npos);
    }
    EXPECT_EQ(dev.log.timed_allocations, 0) << (sampled ? "sampled throughput" : "whole batch");
    EXPECT_GE(dev.log.reserves, 4) << "each timed prefill reserves first";
  }
  // A point extrapolated from layer probes: the probes' repeats too.
  // The throughput's prefill after a batch search that ended on a batch that did not fit (the
  // runners clear their buffers then); a fixed --batch with no latency prefill before (the warm-up
  // is one sequence); the warm-up dropped by the budget.
  {
    FakeBackend dev;
    dev.log.oom_above_batch = 2;
    SweepSettings s = settings();
    s.max_batch = 9;  // 9 fails, then 4 fails, 2 fits, 3 fails: the search ends on a failure
    const auto rows = sweep(s, dev);
    EXPECT_EQ(row(rows, "throughput", "throughput_tokens_per_s").batch, 2);
    EXPECT_EQ(dev.log.timed_allocations, 0) << "after a batch search ending on a failure";
  }
  {
    FakeBackend dev;
    SweepSettings s = settings();
    s.metrics = {"throughput"};
    s.batch = 3;
    sweep(s, dev);
    EXPECT_EQ(dev.log.timed_allocations, 0) << "a fixed batch after a warm-up of one sequence";
  }
  {
    FakeBackend dev;
    SweepSettings s = settings();
    s.metrics = {"prefill"};
    s.budget_s = 2.5 * predicted_prefill_s(s, dev);  // no warm-up, 2 repeats (BudgetDropsTheWarmupAndCutsRepeats)
    const auto rows = sweep(s, dev);
    EXPECT_NE(row(rows, "prefill", "prefill_latency_s").notes.find("no warm-up"), std::string::npos);
    EXPECT_EQ(dev.log.timed_allocations, 0) << "with no warm-up";
  }
  // (As PointThatDoesNotFitIsExtrapolatedFromLayerProbes: yoco-3b does not fit, its probes do.)
  FakeBackend dev;
  dev.log.per_layer = 0.5;
  dev.bytes_per_layer = true;
  SweepSettings s = settings();
  s.models = {"yoco-3b"};
  s.metrics = {"prefill", "decode"};
  dev.usable = 1.0 * (1024 + 32 + 1) * dev.bytes_per_token * 10;
  const auto rows = sweep(s, dev);
  EXPECT_EQ(row(rows, "prefill", "prefill_latency_s").method, "extrapolated")
      << row(rows, "prefill", "prefill_latency_s").notes;
  EXPECT_EQ(dev.log.creates, 2) << "the two probes";
  EXPECT_EQ(dev.log.timed_allocations, 0);
}

TEST(SweepProtocol, CuptiBreakdownComesAfterTheTimedRunsAndResumes) {
  FakeBackend dev;
  dev.profiler = true;
  SweepSettings s = settings();
  s.metrics = {"prefill", "decode"};
  s.cupti = true;
  const auto rows = sweep(s, dev);
  EXPECT_EQ(dev.profiled, (std::vector<std::string>{"prefill", "decode"}));
  EXPECT_NEAR(*row(rows, "prefill.gemm", "gpu_time_s").value, 0.75 * kPrefillPerToken * 1024, 1e-12);
  EXPECT_NEAR(*row(rows, "decode.gemm", "gpu_time_s").value, 0.75 * kStep, 1e-12) << "per decode step";
  EXPECT_NEAR(*row(rows, "decode.kernels", "cupti_overhead_fraction").value, 0, 1e-9);
  EXPECT_EQ(row(rows, "prefill", "prefill_latency_s").repeats, 3) << "the profiled prefill is not a timed one";
  EXPECT_EQ(dev.log.prefills, 1 + 3 + 1);
  // The profiled prefill has the last timed one's shape (its decode room), so
  // a runner keeping a generation's caches across one shape keeps them there:
  // no allocation in the profiled run that the timed median lacks.
  ASSERT_EQ(dev.log.prefill_caps.size(), 5u);
  EXPECT_GT(dev.log.prefill_caps[3], dev.log.prefill_caps[2]) << "the last timed prefill reserves decode room";
  EXPECT_EQ(dev.log.prefill_caps[4], dev.log.prefill_caps[3]);
  // The rows resume as their phase's: a finished file resumes to itself.
  FakeBackend again;
  again.profiler = true;
  SweepIo io;
  io.previous = &rows;
  Progress progress(1);
  const auto resumed = run_sweep(s, again, progress, io);
  EXPECT_EQ(again.log.prefills, 0);
  EXPECT_NEAR(*row(resumed, "prefill:fake_kernel", "kernel_time_s").value, 0.25 * kPrefillPerToken * 1024, 1e-12);
  // A profile that fails is one failed row of its phase; the rest stands.
  FakeBackend failing;
  failing.profiler = true;
  failing.fail_phase = "decode";
  const auto part = sweep(s, failing);
  EXPECT_EQ(row(part, "prefill.gemm", "gpu_time_s").method, "measured");
  EXPECT_EQ(row(part, "decode", "decode_step_latency_s").method, "measured");
  const ResultRow& f = row(part, "decode.kernels", "gpu_time_s");
  EXPECT_EQ(f.method, "failed");
  EXPECT_NE(f.notes.find("the kernel profiler's decode failed: CUPTI delivered no kernel records"), std::string::npos)
      << f.notes;
  // Only the phases of --metrics are profiled (so that the file resumes).
  FakeBackend decode_only;
  decode_only.profiler = true;
  SweepSettings d = s;
  d.metrics = {"decode"};
  sweep(d, decode_only);
  EXPECT_EQ(decode_only.profiled, std::vector<std::string>{"decode"});
  // A prefill over a quarter of the budget is not profiled again; the decode
  // steps are, on the timed ones' cache (no prefill of their own).
  FakeBackend tight;
  tight.profiler = true;
  SweepSettings t = s;
  t.budget_s = 0.35;  // the fake prefill takes 0.1024 s: over 0.35 / 4
  const auto tight_rows = sweep(t, tight);
  EXPECT_EQ(tight.profiled, std::vector<std::string>{"decode"});
  EXPECT_EQ(tight.log.prefills, 1 + 3) << "neither a profiled prefill nor one for the profiled decode";
  const ResultRow& np = row(tight_rows, "prefill.kernels", "gpu_time_s");
  EXPECT_EQ(np.method, "over_budget");
  EXPECT_NE(np.notes.find("not profiled: one more prefill takes"), std::string::npos) << np.notes;
  EXPECT_EQ(row(tight_rows, "decode.gemm", "gpu_time_s").method, "measured");
  // A device without a profiler refuses --cupti before anything runs.
  FakeBackend none;
  EXPECT_THROW(sweep(s, none), InputError);
  EXPECT_EQ(none.log.creates, 0);
}

// A device that is lost (a GPU whose context died) would fail every later point
// for the same reason: the sweep stops after the point that failed, every
// point so far handed over for the file.
class LostBackend : public FakeBackend {
 public:
  std::unique_ptr<ModelRunner> create_runner(const ModelConfig&, Precision, uint64_t) override {
    throw std::runtime_error("CUDA error in gRet chunk: an illegal memory access was encountered");
  }
  std::string device_lost() override { return "the CUDA context is lost: an illegal memory access was encountered"; }
};

TEST(SweepProtocol, ALostDeviceStopsTheSweepKeepingItsRows) {
  LostBackend dev;
  SweepSettings s = settings();
  s.lengths = {1024, 2048};
  s.metrics = {"prefill"};
  std::vector<int> done;
  std::vector<ResultRow> last;
  SweepIo io;
  io.on_point = [&](const std::vector<ResultRow>& rows, int points_done) {
    done.push_back(points_done);
    last = rows;
  };
  Progress progress(2);
  try {
    run_sweep(s, dev, progress, io);
    FAIL() << "the sweep went on after the device was lost";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("the CUDA context is lost"), std::string::npos) << e.what();
  }
  EXPECT_EQ(done, std::vector<int>{1}) << "stopped after the first point";
  EXPECT_EQ(row(last, "prefill", "prefill_latency_s").method, "failed");
}

// The CPU reference's gRet temporaries in the memory guard: the parallel
// paradigm's n x n, a chunk's chunkwise, none in the recurrence. They were
// charged n x n whatever the paradigm, so that `forward --paradigm recurrent`
// over 60K tokens of yoco-tiny was refused as needing 29.6 GB, and every
// chunkwise prefill of --prefill-chunk 32768 carried 8.6 GB it does not use.
TEST(HostMemory, GretTemporariesAreThoseOfTheParadigm) {
  const ModelConfig y = preset_config("yoco-tiny"), t = preset_config("transformer-tiny");
  const double n = 200000, chunk = static_cast<double>(y.gret_chunk_size);
  const double parallel = yoco::cli::forward_bytes_estimate(y, 4, 1, n);
  const double chunkwise = yoco::cli::forward_bytes_estimate(y, 4, 1, n, chunk);
  const double recurrent = yoco::cli::forward_bytes_estimate(y, 4, 1, n, 0);
  EXPECT_DOUBLE_EQ(parallel - recurrent, 2 * n * n * 4);
  EXPECT_DOUBLE_EQ(chunkwise - recurrent, 2 * chunk * chunk * 4);
  EXPECT_LT(recurrent, 5e9);  // the logits and activations of 200K rows, not 320 GB
  EXPECT_EQ(yoco::cli::forward_bytes_estimate(y, 4, 1, n, -1), parallel);
  EXPECT_EQ(yoco::cli::forward_bytes_estimate(y, 4, 1, 100, 1e9), yoco::cli::forward_bytes_estimate(y, 4, 1, 100));
  // No gRet, nothing to choose.
  EXPECT_EQ(yoco::cli::forward_bytes_estimate(t, 4, 1, n, 0), yoco::cli::forward_bytes_estimate(t, 4, 1, n));
  // A generation's prefill runs chunkwise: a 32K prompt in one step of 32768 holds a gRet chunk, not 32K x 32K.
  EXPECT_LT(yoco::cli::generation_bytes_estimate(y, 4, 1, 32768, 64, 32768, false), 1e9);
}

}  // namespace
}  // namespace yoco::cli

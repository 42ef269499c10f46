#include "check_generate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "counter_rng.hpp"
#include "errors.hpp"
#include "safetensors.hpp"

namespace yoco::check {

namespace {

constexpr int64_t kBlock = 1 << 20;  // elements converted and written at a time

double unit_uniform(uint64_t key, uint64_t index) {
  return std::sqrt(3.0) * static_cast<double>(counter_uniform_pm1(key, index));
}

// Streams one token tensor of logical shape [B, S, H, inner] in file order
// (that shape, or [B, H, S, inner]); the value of a logical element depends on
// its [B, S, H, inner] index only.
template <class F>
void stream_tokens(SafetensorsWriter& w, int64_t B, int64_t S, int64_t H, int64_t inner, bool heads_first, F value) {
  const int64_t total = B * S * H * inner;
  std::vector<double> buf(static_cast<size_t>(std::min(total, kBlock)));
  for (int64_t first = 0; first < total; first += kBlock) {
    const int64_t n = std::min(kBlock, total - first);
    for (int64_t i = 0; i < n; ++i) {
      int64_t r = first + i;
      const int64_t c = r % inner;
      r /= inner;
      int64_t s, h;
      if (heads_first) {
        s = r % S;
        r /= S;
        h = r % H;
        r /= H;
      } else {
        h = r % H;
        r /= H;
        s = r % S;
        r /= S;
      }
      buf[static_cast<size_t>(i)] = value(((r * S + s) * H + h) * inner + c);
    }
    w.append(buf.data(), n);
  }
}

// A scale is checked on the largest magnitude it gives, rounded as stored: an
// inf in the file was otherwise written without a word and only refused later,
// when judged, as inputs out of range.
void storable(const char* option, double scale, double largest, DType t) {
  unsigned char buf[8];
  encode_value(t, largest, buf);
  if (!std::isfinite(decode_value(t, buf))) {
    char text[128];
    std::snprintf(text, sizeof text, " %.6g: magnitudes up to %.3g overflow %s; give a smaller scale", scale, largest,
                  t == DType::f16 ? "f16" : t == DType::bf16 ? "bf16" : "f32");
    throw InputError(option + std::string(text));
  }
}

void started(const TensorStarted& f, const char* name) {
  if (f) f(name);
}

void positive(const char* what, int64_t x) {
  if (x < 1) throw InputError(std::string("--shape: ") + what + " must be >= 1, got " + std::to_string(x));
}

}  // namespace

uint64_t generate_gret_inputs(const std::string& path, const GretGenerateOptions& o) {
  positive("B", o.B);
  positive("T", o.T);
  positive("H", o.H);
  positive("D", o.D);
  // |g| peaks at x = -sqrt(3) (log1p(e^sqrt3)); |g_gamma| at head 0 (-log1p(-2^-5)).
  storable("--gate-scale", o.gate_scale,
           o.gate_scale * (o.g_gamma ? -std::log1p(-std::ldexp(1.0, -5)) : std::log1p(std::exp(std::sqrt(3.0))) / 16.0),
           DType::f32);
  const int64_t N = o.cu_seqlens.empty() ? o.B : static_cast<int64_t>(o.cu_seqlens.size()) - 1;
  // The generator's offsets come from --packed (--cu-seqlens names a tensor
  // when judging, an option this mode refuses).
  if (!o.cu_seqlens.empty()) {
    if (o.B != 1) throw InputError("--packed: packed sequences need batch 1, --shape has B = " + std::to_string(o.B));
    if (o.cu_seqlens.size() < 2 || o.cu_seqlens.front() != 0 || o.cu_seqlens.back() != o.T ||
        !std::is_sorted(o.cu_seqlens.begin(), o.cu_seqlens.end()))
      throw InputError("--packed: offsets must rise from 0 to T = " + std::to_string(o.T));
  }
  const std::vector<int64_t> tok = o.bhtd ? std::vector<int64_t>{o.B, o.H, o.T, o.D} : std::vector<int64_t>{o.B, o.T, o.H, o.D};
  std::vector<SafetensorsWriter::Spec> specs{{"q", o.dtype, tok}, {"k", o.dtype, tok}, {"v", o.dtype, tok}};
  if (o.g_gamma) specs.push_back({"g_gamma", DType::f32, {o.H}});
  else specs.push_back({"g", DType::f32, o.bhtd ? std::vector<int64_t>{o.B, o.H, o.T} : std::vector<int64_t>{o.B, o.T, o.H}});
  if (o.initial_state) specs.push_back({"initial_state", DType::f32, {N, o.H, o.D, o.D}});
  if (!o.cu_seqlens.empty()) specs.push_back({"cu_seqlens", DType::i64, {N + 1}});
  SafetensorsWriter w(path, specs,
                      {{"generator", "yoco check gret --generate"}, {"seed", std::to_string(o.seed)},
                       {"gate_scale", std::to_string(o.gate_scale)}});
  uint64_t bytes = 0;
  for (const auto& s : specs) {
    int64_t n = 1;
    for (auto d : s.shape) n *= d;
    bytes += static_cast<uint64_t>(n) * dtype_size(s.dtype);
  }
  for (const char* name : {"q", "k", "v"}) {
    started(o.on_tensor, name);
    const uint64_t key = tensor_stream_key(o.seed, name);
    stream_tokens(w, o.B, o.T, o.H, o.D, o.bhtd, [&](int64_t i) { return unit_uniform(key, static_cast<uint64_t>(i)); });
  }
  started(o.on_tensor, o.g_gamma ? "g_gamma" : "g");
  if (o.g_gamma) {
    std::vector<double> gg(static_cast<size_t>(o.H));
    for (int64_t h = 0; h < o.H; ++h) gg[static_cast<size_t>(h)] = o.gate_scale * std::log1p(-std::ldexp(1.0, -5 - static_cast<int>(std::min<int64_t>(h, 50))));
    w.append(gg.data(), o.H);
  } else {
    const uint64_t key = tensor_stream_key(o.seed, "g");
    stream_tokens(w, o.B, o.T, o.H, 1, o.bhtd, [&](int64_t i) {
      const double x = unit_uniform(key, static_cast<uint64_t>(i));
      const double logsigmoid = x >= 0 ? -std::log1p(std::exp(-x)) : x - std::log1p(std::exp(x));
      return o.gate_scale * logsigmoid / 16.0;
    });
  }
  if (o.initial_state) {
    started(o.on_tensor, "initial_state");
    const uint64_t key = tensor_stream_key(o.seed, "initial_state");
    const int64_t n = N * o.H * o.D * o.D;
    std::vector<double> buf(static_cast<size_t>(std::min(n, kBlock)));
    for (int64_t first = 0; first < n; first += kBlock) {
      const int64_t m = std::min(kBlock, n - first);
      for (int64_t i = 0; i < m; ++i) {
        // The value of state entry [K][V] depends on its [N, H, K, V] index: as
        // [V, K] the file holds the same states, transposed.
        int64_t e = first + i;
        if (o.state_vk) {
          const int64_t col = e % o.D, row = (e / o.D) % o.D, mat = e / (o.D * o.D);
          e = (mat * o.D + col) * o.D + row;
        }
        buf[static_cast<size_t>(i)] = unit_uniform(key, static_cast<uint64_t>(e));
      }
      w.append(buf.data(), m);
    }
  }
  if (!o.cu_seqlens.empty()) {
    std::vector<double> cu(o.cu_seqlens.begin(), o.cu_seqlens.end());
    w.append(cu.data(), static_cast<int64_t>(cu.size()));
  }
  w.commit();
  return bytes;
}

uint64_t generate_attention_inputs(const std::string& path, const AttentionGenerateOptions& o) {
  positive("B", o.B);
  positive("Sq", o.Sq);
  positive("Sk", o.Sk);
  positive("Hq", o.Hq);
  positive("Hkv", o.Hkv);
  positive("D", o.D);
  storable("--q-scale", o.q_scale, o.q_scale * std::sqrt(3.0), o.dtype);
  if (o.Hq % o.Hkv != 0)
    throw InputError("--shape: query heads " + std::to_string(o.Hq) + " must be a multiple of key/value heads " +
                     std::to_string(o.Hkv));
  auto shape = [&](int64_t S, int64_t H) {
    return o.bhsd ? std::vector<int64_t>{o.B, H, S, o.D} : std::vector<int64_t>{o.B, S, H, o.D};
  };
  std::vector<SafetensorsWriter::Spec> specs{
      {"q", o.dtype, shape(o.Sq, o.Hq)}, {"k", o.dtype, shape(o.Sk, o.Hkv)}, {"v", o.dtype, shape(o.Sk, o.Hkv)}};
  SafetensorsWriter w(path, specs,
                      {{"generator", "yoco check attention --generate"}, {"seed", std::to_string(o.seed)},
                       {"q_scale", std::to_string(o.q_scale)}});
  const uint64_t kq = tensor_stream_key(o.seed, "q"), kk = tensor_stream_key(o.seed, "k"),
                 kv = tensor_stream_key(o.seed, "v");
  started(o.on_tensor, "q");
  stream_tokens(w, o.B, o.Sq, o.Hq, o.D, o.bhsd, [&](int64_t i) { return o.q_scale * unit_uniform(kq, static_cast<uint64_t>(i)); });
  started(o.on_tensor, "k");
  stream_tokens(w, o.B, o.Sk, o.Hkv, o.D, o.bhsd, [&](int64_t i) { return unit_uniform(kk, static_cast<uint64_t>(i)); });
  started(o.on_tensor, "v");
  stream_tokens(w, o.B, o.Sk, o.Hkv, o.D, o.bhsd, [&](int64_t i) { return unit_uniform(kv, static_cast<uint64_t>(i)); });
  w.commit();
  return static_cast<uint64_t>((o.B * o.Sq * o.Hq + 2 * o.B * o.Sk * o.Hkv) * o.D) * dtype_size(o.dtype);
}

}  // namespace yoco::check

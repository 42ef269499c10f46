#include "host_memory.hpp"

#include <unistd.h>

#include <algorithm>

#include "errors.hpp"
#include "format.hpp"

namespace yoco::cli {

double host_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 0.0;
  return static_cast<double>(pages) * static_cast<double>(page);
}

void require_host_memory(double bytes, const std::string& what) {
  const double have = host_memory_bytes();
  if (have > 0 && bytes > have)
    throw InputError("not enough memory for " + what + ": about " + human_bytes(bytes) + " needed, this machine has " +
                     human_bytes(have));
}

namespace {
double d(int64_t x) { return static_cast<double>(x); }
// Head dims and widths from the raw fields, in double (no int64 products).
double attn_head_dim(const ModelConfig& c) {
  if (!c.is_yoco() && c.head_dim > 0) return d(c.head_dim);
  return d(c.dim) / d(c.n_attn_heads);
}
double q_width(const ModelConfig& c) { return d(c.n_attn_heads) * attn_head_dim(c); }
double kv_width(const ModelConfig& c) { return d(c.n_attn_kv_heads) * attn_head_dim(c); }
}  // namespace

double weights_elements_estimate(const ModelConfig& c) {
  const double dm = d(c.dim), f = d(c.hidden_dim), v = d(c.vocab_size), ffn = 3 * dm * f;
  if (c.is_yoco()) {
    const double ls = d(c.n_self_layers()), lc = d(c.n_cross_layers());
    double self = 2 * dm + 4 * dm * dm + ffn;
    if (c.self_decoder() == SelfDecoderKind::gret) self += dm * dm + d(c.n_self_heads) * dm;
    const double cross = 2 * dm + 2 * q_width(c) * dm + ffn;
    return 2 * v * dm + ls * self + dm + 2 * kv_width(c) * dm + lc * cross + dm;
  }
  const double layer = 2 * dm + 2 * q_width(c) * dm + 2 * kv_width(c) * dm + ffn;
  return 2 * v * dm + d(c.n_layers) * layer + dm;
}

double forward_bytes_estimate(const ModelConfig& c, int elem, double batch, double n, double gret_block) {
  const double rows = batch * n;
  const double widths = 12 * d(c.dim) + 3 * d(c.hidden_dim) + 2 * q_width(c) + 2 * kv_width(c);
  double bytes = rows * (d(c.vocab_size) + widths) * elem;
  bytes += rows * d(c.vocab_size) * 8;  // logits handed back as double
  bytes += rows * 8 * 2;                // token ids
  bytes += 128 * n * elem * 2;          // attention score blocks
  // The parallel paradigm's decay and score matrices, n x n; chunkwise's of a chunk; none in the recurrence.
  // (Charged n x n whatever the paradigm, a recurrent forward over 200K tokens "needed 323 GB".)
  const double side = gret_block < 0 ? n : std::min(gret_block, n);
  if (c.is_yoco() && c.self_decoder() == SelfDecoderKind::gret) bytes += 2 * side * side * elem;
  return bytes;
}

double generation_bytes_estimate(const ModelConfig& c, int elem, double batch, double prompt, double gen,
                                 double prefill_chunk, bool check) {
  const double cap = prompt + gen;
  double caches = 2 * batch * cap * kv_width(c) * elem;
  if (c.is_yoco()) {
    const double ls = d(c.n_self_layers());
    if (c.self_decoder() == SelfDecoderKind::gret)
      caches += ls * batch * d(c.n_self_heads) * d(c.self_head_dim()) * d(c.self_head_dim()) * elem;
    else
      caches += 2 * ls * batch * d(c.window()) * d(c.dim) * elem;
  } else {
    caches *= d(c.n_layers);
  }
  const double chunk = std::min(prefill_chunk, prompt);
  // The prefill runs gRet chunkwise, in the config's chunks.
  double bytes = caches + forward_bytes_estimate(c, elem, batch, chunk, d(c.gret_chunk_size)) + 128 * cap * elem * 2;
  bytes += batch * cap * 8;  // token ids
  // run_greedy keeps every step's logits only for the check (without it,
  // --gen 5000000 on yoco-tiny was refused for 26.9 GB it would never hold).
  if (check) bytes += (gen + 1) * batch * d(c.vocab_size) * 8 + forward_bytes_estimate(c, elem, batch, cap);
  return bytes;
}

}  // namespace yoco::cli

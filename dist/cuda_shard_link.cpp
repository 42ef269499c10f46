#include "cuda_shard_link.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "dtype.hpp"
#include "errors.hpp"
#include "partial_attention.hpp"
#include "runner/runner_support.hpp"

namespace yoco::dist {

using cuda::check_cuda;

namespace {

template <class T>
int64_t bytes_of(const std::vector<T>& v) {
  return static_cast<int64_t>(v.size() * sizeof(T));
}

// Device -> host (the stream's earlier work first); returns once the bytes are here.
void download(void* dst, const void* src, int64_t bytes, cudaStream_t stream, const char* what) {
  check_cuda(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost, stream), what);
  check_cuda(cudaStreamSynchronize(stream), what);
}

void upload(void* dst, const void* src, int64_t bytes, cudaStream_t stream, const char* what) {
  check_cuda(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyHostToDevice, stream), what);
  check_cuda(cudaStreamSynchronize(stream), what);  // the host buffer goes away after the call
}

}  // namespace

CudaShardLink::CudaShardLink(Communicator& comm)
    : comm_(comm), device_collectives_(std::strcmp(comm.backend(), "nccl") == 0) {}

CudaShardLink::~CudaShardLink() {
  for (void* p : staging_)
    if (p) cudaFree(p);
}

void CudaShardLink::plan(const ShardPlan& plan) {
  if (plan.ranks() != comm_.size())
    throw InputError("the shard plan has " + std::to_string(plan.ranks()) + " ranks, the communicator " +
                     std::to_string(comm_.size()));
  plan_ = plan;
  const int r = comm_.rank();
  shard_.rank = r;
  shard_.ranks = comm_.size();
  shard_.begin = plan_.begin(r);
  shard_.length = plan_.length(r);
  shard_.total = plan_.end(plan_.ranks() - 1);
}

void CudaShardLink::plan_ring(const ShardPlan& chunks) {
  if (chunks.ranks() != 2 * comm_.size())
    throw InputError("context parallelism over " + std::to_string(comm_.size()) + " ranks needs " +
                     std::to_string(2 * comm_.size()) + " chunks, the plan has " + std::to_string(chunks.ranks()));
  ring_.rank = comm_.rank();
  ring_.ranks = comm_.size();
  ring_.bounds = chunks.bounds;
}

void* CudaShardLink::device_staging(int which, int64_t bytes) {
  if (staging_bytes_[which] < bytes) {
    if (staging_[which]) cudaFree(staging_[which]);
    staging_[which] = nullptr;
    staging_bytes_[which] = 0;
    check_cuda(cudaMalloc(&staging_[which], static_cast<size_t>(bytes)), "the NCCL staging buffer");
    staging_bytes_[which] = bytes;
  }
  return staging_[which];
}

void CudaShardLink::allgather(const void* send, int64_t bytes, void* recv, const std::string& label) {
  if (!device_collectives_) return comm_.allgather(send, bytes, recv, label);
  const int64_t all = bytes * comm_.size();
  void* ds = device_staging(0, std::max<int64_t>(bytes, 1));
  void* dr = device_staging(1, std::max<int64_t>(all, 1));
  // A pageable host-to-device cudaMemcpy may return before its DMA lands, and
  // NCCL's stream is not ordered after the legacy one: the device synchronised
  // before the collective is enqueued. (Device-to-host copies return complete.)
  check_cuda(cudaMemcpy(ds, send, static_cast<size_t>(bytes), cudaMemcpyHostToDevice), "NCCL staging in");
  check_cuda(cudaDeviceSynchronize(), "NCCL staging in");
  comm_.allgather(ds, bytes, dr, label);
  check_cuda(cudaMemcpy(recv, dr, static_cast<size_t>(all), cudaMemcpyDeviceToHost), "NCCL staging out");
}

void CudaShardLink::broadcast(void* buf, int64_t bytes, int root, const std::string& label) {
  if (!device_collectives_) return comm_.broadcast(buf, bytes, root, label);
  void* d = device_staging(0, std::max<int64_t>(bytes, 1));
  check_cuda(cudaMemcpy(d, buf, static_cast<size_t>(bytes), cudaMemcpyHostToDevice), "NCCL staging in");
  check_cuda(cudaDeviceSynchronize(), "NCCL staging in");
  comm_.broadcast(d, bytes, root, label);
  check_cuda(cudaMemcpy(buf, d, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost), "NCCL staging out");
}

bool CudaShardLink::gret_state_in(int64_t layer, float* state, const float* log_gamma, int64_t batch, int64_t n,
                                  int64_t heads, int64_t head_dim, cudaStream_t stream) {
  (void)layer;
  // A pair's total log decay, its D x D state, one float of padding: the MPI
  // backend moves whole 8-byte words (1 + D^2 is odd).
  const int64_t pairs = batch * heads, DD = head_dim * head_dim, width = DD + 2;
  std::vector<float> lg(static_cast<size_t>(batch * n * heads)), local(static_cast<size_t>(pairs * DD));
  download(lg.data(), log_gamma, bytes_of(lg), stream, "gRet shard: log decays to the host");
  download(local.data(), state, bytes_of(local), stream, "gRet shard: local states to the host");
  // Per (sequence, head): the shard's total log decay (summed in double), then its local state.
  std::vector<float> mine(static_cast<size_t>(pairs * width)), all(mine.size() * comm_.size());
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      double total = 0;
      for (int64_t t = 0; t < n; ++t) total += static_cast<double>(lg[(b * n + t) * heads + h]);
      const int64_t i = b * heads + h;
      mine[i * width] = static_cast<float>(total);
      std::copy_n(local.begin() + i * DD, DD, mine.begin() + i * width + 1);
      mine[i * width + DD + 1] = 0.0f;
    }
  allgather(mine.data(), bytes_of(mine), all.data(), "gret_state");
  const int r = comm_.rank();
  if (r == 0) return false;  // nothing enters the first shard: its states and outputs are final
  // S_in(r) = sum_{j < r} (decay of ranks j+1 .. r-1) S_loc(j), as a running scan in rank order, in double.
  std::vector<float> in(static_cast<size_t>(pairs * DD));
  std::vector<double> s(static_cast<size_t>(DD));
  for (int64_t i = 0; i < pairs; ++i) {
    std::fill(s.begin(), s.end(), 0.0);
    for (int j = 0; j < r; ++j) {
      const float* p = &all[(j * pairs + i) * width];
      const double decay = std::exp(static_cast<double>(p[0]));
      for (int64_t e = 0; e < DD; ++e) s[e] = decay * s[e] + static_cast<double>(p[1 + e]);
    }
    for (int64_t e = 0; e < DD; ++e) in[i * DD + e] = static_cast<float>(s[e]);
  }
  upload(state, in.data(), bytes_of(in), stream, "gRet shard: the incoming state to the device");
  return true;
}

void CudaShardLink::swa_window_in(int64_t layer, const __nv_bfloat16* kv, int64_t stride, int64_t batch, int64_t n,
                                  int64_t d, int64_t window, __nv_bfloat16* ring, cudaStream_t stream) {
  (void)layer;
  const int64_t W1 = window - 1, row = 2 * d;  // elements of a key | value row
  if (W1 < 1) return;  // a window of one sees no earlier position (every rank the same)
  // This shard's last min(n, W - 1) rows per sequence, padded to W - 1.
  const int64_t m = std::min(n, W1), width = batch * W1 * row;
  std::vector<uint16_t> mine(static_cast<size_t>(width), 0), all(mine.size() * comm_.size());
  for (int64_t b = 0; b < batch; ++b)
    check_cuda(cudaMemcpy2DAsync(mine.data() + b * W1 * row, static_cast<size_t>(row * 2), kv + (b * n + n - m) * stride,
                                 static_cast<size_t>(stride * 2), static_cast<size_t>(row * 2), static_cast<size_t>(m),
                                 cudaMemcpyDeviceToHost, stream),
               "SWA shard: the last rows to the host");
  check_cuda(cudaStreamSynchronize(stream), "SWA shard: the last rows to the host");
  allgather(mine.data(), bytes_of(mine), all.data(), "swa_window");
  const int r = comm_.rank();
  const int64_t begin = plan_.begin(r), first = std::max<int64_t>(0, begin - W1), count = begin - first;
  if (count == 0) return;
  // Positions [first, begin) in order, each from the rank that holds it (within its last W - 1 rows).
  std::vector<uint16_t> prev(static_cast<size_t>(batch * count * row));
  for (int j = 0; j < r; ++j) {
    const int64_t tail0 = plan_.end(j) - std::min(plan_.length(j), W1);  // rank j sent [tail0, end_j)
    for (int64_t t = std::max(first, tail0); t < plan_.end(j); ++t)
      for (int64_t b = 0; b < batch; ++b)
        std::copy_n(all.begin() + j * width + (b * W1 + t - tail0) * row, row,
                    prev.begin() + (b * count + t - first) * row);
  }
  // Into the ring's slots p mod W: at most two contiguous runs a sequence.
  const int64_t slot0 = first % window, run1 = std::min(count, window - slot0);
  for (int64_t b = 0; b < batch; ++b) {
    const uint16_t* src = prev.data() + b * count * row;
    check_cuda(cudaMemcpyAsync(ring + (b * window + slot0) * row, src, static_cast<size_t>(run1 * row * 2),
                               cudaMemcpyHostToDevice, stream),
               "SWA shard: the window into the ring");
    if (count > run1)
      check_cuda(cudaMemcpyAsync(ring + b * window * row, src + run1 * row, static_cast<size_t>((count - run1) * row * 2),
                                 cudaMemcpyHostToDevice, stream),
                 "SWA shard: the window into the ring");
  }
  check_cuda(cudaStreamSynchronize(stream), "SWA shard: the window into the ring");
}

void CudaShardLink::attention_across(const float* part_o, const float* part_lse, int64_t batch, int64_t heads,
                                     int splits, int64_t head_dim, __nv_bfloat16* out, const char* label,
                                     cudaStream_t stream) {
  if (splits < 2) throw std::logic_error("CudaShardLink::attention_across needs split partials (splits >= 2)");
  const int64_t slots = batch * heads * splits;
  std::vector<float> o(static_cast<size_t>(slots * head_dim)), lse(static_cast<size_t>(slots));
  download(o.data(), part_o, bytes_of(o), stream, "cross attention: split partials to the host");
  download(lse.data(), part_lse, bytes_of(lse), stream, "cross attention: split partials to the host");
  // This rank's splits merged into one partial per (sequence, head) in
  // attention_combine's layout -- m, l = sum exp(m_s - m), the unnormalised
  // output sum exp(m_s - m) o_s, with m_s = lse_s ln 2 (the GPU's lse is log2 of
  // the sum of exp(scores)) -- so that every rank sends the same B x H x (Da + 2)
  // doubles whatever its split count (which follows its row count), as the CPU
  // reference does. No key on this rank: (-inf, 0, 0), weighing nothing.
  const double ninf = -std::numeric_limits<double>::infinity(), ln2 = std::log(2.0);
  const int64_t w = partial_width(head_dim);
  std::vector<double> mine(static_cast<size_t>(batch * heads * w), 0.0), all(mine.size() * comm_.size());
  for (int64_t bh = 0; bh < batch * heads; ++bh) {
    double* p = &mine[bh * w];
    double m = ninf;
    for (int s = 0; s < splits; ++s) {
      const float l2 = lse[bh * splits + s];  // decode_plan::partial_slot
      if (l2 != -std::numeric_limits<float>::infinity()) m = std::max(m, static_cast<double>(l2) * ln2);
    }
    p[0] = m;
    if (m == ninf) continue;
    for (int s = 0; s < splits; ++s) {
      const int64_t slot = bh * splits + s;
      if (lse[slot] == -std::numeric_limits<float>::infinity()) continue;
      const double f = std::exp(static_cast<double>(lse[slot]) * ln2 - m);
      p[1] += f;
      for (int64_t e = 0; e < head_dim; ++e) p[2 + e] += f * static_cast<double>(o[slot * head_dim + e]);
    }
  }
  allgather(mine.data(), bytes_of(mine), all.data(), label);
  const Mat<float> combined = attention_combine<float>(all, comm_.size(), batch, heads, head_dim);
  std::vector<uint16_t> bits(static_cast<size_t>(batch * heads * head_dim));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t e = 0; e < heads * head_dim; ++e) bits[b * heads * head_dim + e] = float_to_bf16_bits(combined(b, e));
  upload(out, bits.data(), bytes_of(bits), stream, "cross attention: the combined output to the device");
}

void CudaShardLink::hidden_from(int root, float* x, int64_t elems, cudaStream_t stream) {
  if (root < 0 || root >= comm_.size())
    throw std::logic_error("CudaShardLink::hidden_from: root " + std::to_string(root) + " of " +
                           std::to_string(comm_.size()) + " ranks");
  // Padded to whole 8-byte words (the MPI backend's unit): B x V logits may be odd.
  std::vector<float> buf(static_cast<size_t>((elems + 1) / 2 * 2), 0.0f);
  const int64_t bytes = elems * static_cast<int64_t>(sizeof(float));
  if (comm_.rank() == root) download(buf.data(), x, bytes, stream, "the last hidden state to the host");
  broadcast(buf.data(), bytes_of(buf), root, "last_hidden");
  if (comm_.rank() != root) upload(x, buf.data(), bytes, stream, "the last hidden state to the device");
}

void CudaShardLink::gather_rows(const void* mine, int64_t mine_seq_rows, void* all, int64_t all_seq_rows,
                                int64_t batch, int64_t row_bytes, const char* label, cudaStream_t stream) {
  const int R = comm_.size(), r = comm_.rank();
  int64_t most = 0;
  for (int j = 0; j < R; ++j) most = std::max(most, plan_.length(j));
  // This rank's part, padded to the longest shard and to whole 8-byte words (the MPI backend's unit).
  const int64_t n = plan_.length(r), width = (batch * most * row_bytes + 7) / 8 * 8;
  std::vector<unsigned char> part(static_cast<size_t>(width), 0), every(part.size() * R);
  const auto* src = static_cast<const unsigned char*>(mine);
  for (int64_t b = 0; b < batch; ++b)
    check_cuda(cudaMemcpyAsync(part.data() + b * most * row_bytes, src + b * mine_seq_rows * row_bytes,
                               static_cast<size_t>(n * row_bytes), cudaMemcpyDeviceToHost, stream),
               "gathered rows to the host");
  check_cuda(cudaStreamSynchronize(stream), "gathered rows to the host");
  allgather(part.data(), width, every.data(), label);
  auto* dst = static_cast<unsigned char*>(all);
  for (int j = 0; j < R; ++j)
    for (int64_t b = 0; b < batch; ++b)
      check_cuda(cudaMemcpyAsync(dst + (b * all_seq_rows + plan_.begin(j)) * row_bytes,
                                 every.data() + j * width + b * most * row_bytes,
                                 static_cast<size_t>(plan_.length(j) * row_bytes), cudaMemcpyHostToDevice, stream),
                 "gathered rows to the device");
  check_cuda(cudaStreamSynchronize(stream), "gathered rows to the device");
}

void CudaShardLink::ring_pass(const void* send, int64_t send_bytes, void* recv, int64_t recv_bytes,
                              cudaStream_t stream) {
  const int R = comm_.size(), r = comm_.rank(), next = (r + 1) % R, prev = (r - 1 + R) % R;
  if (send_bytes % 8 != 0 || recv_bytes % 8 != 0)  // the MPI backend's unit; a K|V row is 4 kvw bytes
    throw std::logic_error("CudaShardLink::ring_pass: blocks of whole 8-byte words");
  if (device_collectives_) {
    // NCCL on the device buffers themselves: the runner's stream finished
    // writing `send` (NCCL runs on its own stream); sendrecv returns complete.
    check_cuda(cudaStreamSynchronize(stream), "ring step: the keys and values to send");
    comm_.sendrecv(send, send_bytes, next, recv, recv_bytes, prev, "ring_kv");
    return;
  }
  std::vector<unsigned char> out(static_cast<size_t>(send_bytes)), in(static_cast<size_t>(recv_bytes));
  download(out.data(), send, send_bytes, stream, "ring step: the keys and values to the host");
  comm_.sendrecv(out.data(), send_bytes, next, in.data(), recv_bytes, prev, "ring_kv");
  upload(recv, in.data(), recv_bytes, stream, "ring step: the received keys and values to the device");
}

void CudaShardLink::gather_ring_rows(const void* mine, void* all, int64_t batch, int64_t row_bytes,
                                     cudaStream_t stream) {
  const int R = comm_.size();
  int64_t most = 0;
  for (int j = 0; j < R; ++j) most = std::max(most, ring_.rows_of(j));
  // This rank's two pieces as they are ([batch, n0] rows then [batch, n1]), padded to the
  // largest rank's rows and to whole 8-byte words (the MPI backend's unit).
  const int64_t width = (batch * most * row_bytes + 7) / 8 * 8;
  std::vector<unsigned char> part(static_cast<size_t>(width), 0), every(part.size() * R);
  download(part.data(), mine, batch * ring_.rows() * row_bytes, stream, "gathered rows to the host");
  allgather(part.data(), width, every.data(), "logits");
  auto* dst = static_cast<unsigned char*>(all);
  const int64_t total = ring_.total();
  for (int j = 0; j < R; ++j) {
    int64_t at = 0;  // byte offset of the piece in rank j's part
    for (int piece = 0; piece < 2; ++piece) {
      const int c = cuda::ring::chunk_of(j, piece, R);
      const int64_t n = ring_.chunk_length(c), begin = ring_.chunk_begin(c);
      for (int64_t b = 0; b < batch; ++b)
        check_cuda(cudaMemcpyAsync(dst + (b * total + begin) * row_bytes, every.data() + j * width + at + b * n * row_bytes,
                                   static_cast<size_t>(n * row_bytes), cudaMemcpyHostToDevice, stream),
                   "gathered rows to the device");
      at += batch * n * row_bytes;
    }
  }
  check_cuda(cudaStreamSynchronize(stream), "gathered rows to the device");
}

}  // namespace yoco::dist

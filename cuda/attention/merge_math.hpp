#pragma once
// Two softmax attention partials over disjoint sets of keys, each normalised
// (o = sum exp(s) v / sum exp(s)) with its natural-log log-sum-exp, merged
// into the partial over their union: o = w_a o_a + w_b o_b, with weights
// exp(lse_x - lse) and lse = log(exp(lse_a) + exp(lse_b)). The maths of
// attention_merge.cu (ring attention's step) on the host and the device, so
// tests/test_attention_tiles.cpp (AttentionMerge) proves it on the CPU; the pair of dist/
// partial_attention.hpp attention_combine (m, l, unnormalised o in double).
#include <cmath>

#include "arch/hd.hpp"

namespace yoco::cuda::attn {

struct MergeWeights {
  float a = 0, b = 0;  // weights of the two normalised outputs (sum 1, or both 0)
  float lse = 0;       // log-sum-exp of the union
};

// A side with no visible key has lse -inf and weighs nothing; with none on
// either side the union has none either (weights 0: the output stays 0).
YOCO_HD inline MergeWeights merge_weights(float lse_a, float lse_b) {
  MergeWeights w;
  if (lse_a == -INFINITY && lse_b == -INFINITY) {
    w.lse = -INFINITY;
    return w;
  }
  const float m = lse_a > lse_b ? lse_a : lse_b;  // finite: at least one side is
  const float ea = expf(lse_a - m), eb = expf(lse_b - m);  // the larger side's is 1
  const float s = ea + eb;                                 // in [1, 2]
  w.a = ea / s;
  w.b = eb / s;
  w.lse = m + logf(s);
  return w;
}

}  // namespace yoco::cuda::attn

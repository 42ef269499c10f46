#pragma once
// One decode step's state update S ← γ S + kᵀ v, element by element, shared by
// the decode kernels (cuda/gret/gret_recurrent.cu) and the CPU test that models
// them (tests/test_gret_pending.cpp): the deferred step must repeat the eager
// step's arithmetic exactly, so both use this one definition.
//
// Near γ = 1 the product γ·S is formed as S − δ·S with δ = 1 − γ = −expm1(log γ)
// in fp32: fp32 γ itself carries a rounding of up to 3e-8 that repeats every
// step and that the horizon 1/(1 − γ) amplifies (≈ 2e-5 relative in the state
// after 4096 steps at γ = 0.999, ≈ 1e-4 at γ = 0.99994), while δ's rounding
// moves γ by ≤ 3e-8·δ. One rounding for γ·S (fma), one for the sum (fma with
// the exact product k·v).
#include <math.h>

#include "arch/hd.hpp"

namespace yoco::cuda {

struct GretDecay {
  bool near_one;  // log γ > −0.5 (uniform over a head)
  float d;        // δ when near_one, else γ
};

YOCO_HD inline GretDecay make_gret_decay(float log_gamma) {
  const bool near_one = log_gamma > -0.5f;
  return {near_one, near_one ? -expm1f(log_gamma) : expf(log_gamma)};
}

YOCO_HD inline float gret_decay_add(const GretDecay& g, float s, float k, float v) {
  return g.near_one ? fmaf(k, v, fmaf(-g.d, s, s)) : fmaf(g.d, s, k * v);
}

}  // namespace yoco::cuda

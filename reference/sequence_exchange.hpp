#pragma once
// What a self-decoder layer needs from the ranks before it when the prompt is
// split by sequence position across ranks (dist/: chunk-parallel prefill,
// paper appendix A): gRet's incoming state, SWA's previous keys and values.
// The reference model calls it between computing its own part and finishing
// the layer; dist/ implements it over a communicator. No transport here.
#include <cstdint>
#include <vector>

#include "tensor.hpp"

namespace yoco {

template <class T>
class SequenceExchange {
 public:
  virtual ~SequenceExchange() = default;
  // gRet, layer l: in `states` this rank's final state of every (sequence,
  // head) from a zero start, in `log_decay` the sum of its log-gammas (the
  // log of the decay across this rank's tokens). Replaced by the states that
  // enter this rank's first position: sum over ranks j before it of
  // (decay of the ranks between) x state_j; zero on the first rank.
  virtual void gret_states_in(int64_t layer, const std::vector<T>& log_decay, std::vector<Mat<T>>& states) const = 0;
  // SWA, layer l: this rank's keys and values ([batch * n, d], sequence-major)
  // in; out, per sequence, the rows of positions [max(0, pos0 - (W - 1)), pos0)
  // from the ranks before it (empty on the first rank).
  virtual void swa_previous(int64_t layer, const Mat<T>& k, const Mat<T>& v, int64_t batch, int64_t n,
                            std::vector<Mat<T>>& prev_k, std::vector<Mat<T>>& prev_v) const = 0;
};

}  // namespace yoco

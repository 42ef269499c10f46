#pragma once
// Matrix types of the reference. Activations are [tokens, features] row-major;
// a linear weight is [out, in] row-major and maps a row x to x W^T, as in
// PyTorch's nn.Linear, so safetensors data is used without transposition.
#include <Eigen/Dense>
#include <cmath>

namespace yoco {

template <class T>
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using Vec = Eigen::Matrix<T, Eigen::Dynamic, 1>;
template <class T>
using RowVec = Eigen::Matrix<T, 1, Eigen::Dynamic>;

// RMS(a - b) / RMS(b): the error measure of DESIGN.md §6.
template <class A, class B>
double rms_ratio(const A& a, const B& b) {
  const double num = (a.template cast<double>() - b.template cast<double>()).norm();
  const double den = b.template cast<double>().norm();
  if (den == 0.0) return num == 0.0 ? 0.0 : INFINITY;
  return num / den;
}

}  // namespace yoco

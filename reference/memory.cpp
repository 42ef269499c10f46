#include "memory.hpp"

namespace yoco {
ActivationMeter*& current_activation_meter() {
  thread_local ActivationMeter* m = nullptr;
  return m;
}
}  // namespace yoco

// The TMA arithmetic of cuda/arch/tma_plan.hpp on the CPU: the tensor-map view of a [batch, rows,
// stride] bf16 buffer accepts exactly what cuTensorMapEncodeTiled and int32 box coordinates
// allow, and the stage / parity arithmetic of a full/empty mbarrier ring, run against a model of
// mbarrier phases, lets a producer fill use t exactly when use t - stages has been released and
// a consumer read use t exactly when it has been filled.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "arch/tma_plan.hpp"

namespace yoco::cuda::tma {
namespace {

TEST(TmaPlan, ViewOfTheAttentionBuffers) {
  Bf16RowsView v;
  // transformer-3b at 1M tokens: K/V rows of 8 heads x 128, batch 2.
  ASSERT_EQ(bf16_rows_view(0x10000, 2, 1 << 20, 1024, 128, &v), nullptr);
  EXPECT_EQ(v.dims[0], 1024u);
  EXPECT_EQ(v.dims[1], uint64_t{1} << 20);
  EXPECT_EQ(v.dims[2], 2u);
  EXPECT_EQ(v.strides_bytes[0], 2048u);
  EXPECT_EQ(v.strides_bytes[1], uint64_t{2048} << 20);
  EXPECT_EQ(v.box[0], 64u);
  EXPECT_EQ(v.box[1], 128u);
  EXPECT_EQ(v.box[2], 1u);
  // Q inside a fused QKV row (stride (24 + 2*8) * 128), a stride padded by 8 elements.
  EXPECT_EQ(bf16_rows_view(0x10000, 1, 4096, 40 * 128, 128, &v), nullptr);
  EXPECT_EQ(bf16_rows_view(0x10010, 3, 7, 1032, 128, &v), nullptr);
  EXPECT_EQ(v.strides_bytes[1], 2064u * 7);
}

TEST(TmaPlan, RefusesWhatTmaCannotAddress) {
  Bf16RowsView v;
  const auto refuses = [&](uint64_t base, int64_t batch, int64_t rows, int64_t stride, int64_t box, const char* word) {
    const char* why = bf16_rows_view(base, batch, rows, stride, box, &v);
    ASSERT_NE(why, nullptr) << base << " " << batch << " " << rows << " " << stride << " " << box;
    EXPECT_NE(std::string(why).find(word), std::string::npos) << why;
  };
  refuses(0x10008, 1, 128, 1024, 128, "aligned");            // base not 16-byte aligned
  refuses(0x10000, 1, 128, 1028, 128, "16 bytes");           // stride of 2056 bytes
  refuses(0x10000, 0, 128, 1024, 128, "empty");
  refuses(0x10000, 1, 0, 1024, 128, "empty");
  refuses(0x10000, 1, 128, 32, 128, "narrower");             // a row narrower than a 64-column box
  refuses(0x10000, 1, 128, 1024, 0, "1 to 256");
  refuses(0x10000, 1, 128, 1024, 257, "1 to 256");
  refuses(0x10000, 1, int64_t{1} << 31, 64, 128, "2^31");    // a row index past int32
  refuses(0x10000, int64_t{1} << 31, 1, 64, 128, "2^31");
  refuses(0x10000, 2, int64_t{1} << 30, 1024, 128, "2^40");  // 2^30 rows of 2 KiB: a 2^41-byte sequence stride
  // The largest sequence stride below 2^40 bytes is accepted, the next row is not.
  const int64_t rows_max = static_cast<int64_t>(((uint64_t{1} << 40) - 1) / 2048);
  EXPECT_EQ(bf16_rows_view(0x10000, 2, rows_max, 1024, 128, &v), nullptr);
  EXPECT_LT(v.strides_bytes[1], uint64_t{1} << 40);
  refuses(0x10000, 2, rows_max + 1, 1024, 128, "2^40");
}

// A model of one mbarrier as PTX defines it: a phase completes when its expected arrivals have
// arrived; try_wait.parity(P) succeeds iff the phase of parity P has completed, i.e. the
// current (incomplete) phase's parity is not P. A fresh barrier is in phase 0.
struct ModelBarrier {
  int arrivals_expected = 1, arrived = 0;
  int64_t completed = 0;  // phases completed so far; the current phase is number `completed`
  void arrive() {
    if (++arrived == arrivals_expected) {
      arrived = 0;
      ++completed;
    }
  }
  bool try_wait(uint32_t parity) const { return static_cast<uint32_t>(completed & 1) != parity; }
};

TEST(TmaPlan, RingParityMatchesAModelOfMbarrierPhases) {
  for (int stages : {1, 2, 3, 4}) {
    std::vector<ModelBarrier> full(static_cast<size_t>(stages)), empty(static_cast<size_t>(stages));
    const int64_t uses = 25;
    int64_t filled = 0, released = 0;  // uses filled / released so far, in order
    // Interleave: the producer runs ahead as far as the ring allows; the consumer takes one use
    // whenever it is filled. At every step the waits must agree with the counts.
    while (released < uses) {
      if (filled < uses) {
        const int s = ring_stage(filled, stages);
        const bool may_fill = empty[static_cast<size_t>(s)].try_wait(empty_parity(filled, stages));
        EXPECT_EQ(may_fill, filled - released < stages) << stages << " fill " << filled << " released " << released;
        if (may_fill) {
          full[static_cast<size_t>(s)].arrive();
          ++filled;
          continue;
        }
      }
      const int s = ring_stage(released, stages);
      ASSERT_TRUE(full[static_cast<size_t>(s)].try_wait(full_parity(released, stages))) << stages << " " << released;
      // The next use of this stage is not filled yet, so its wait must still block.
      if (released + stages < uses && released + stages >= filled) {
        EXPECT_FALSE(full[static_cast<size_t>(s)].try_wait(full_parity(released + stages, stages)));
      }
      empty[static_cast<size_t>(s)].arrive();
      ++released;
    }
    EXPECT_EQ(filled, uses);
  }
}

}  // namespace
}  // namespace yoco::cuda::tma

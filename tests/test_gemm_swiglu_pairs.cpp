// The fused W1|W3 + SwiGLU kernel in CTA pairs (GemmSwigluCtas::pair, cuda/ops/gemm_swiglu_sm90.cu) on
// the CPU, before a GPU runs it:
// - the pair schedule (gemm_swiglu_plan.hpp: pair_tile_coord) gives every tile to exactly one CTA, the
//   two CTAs of a cluster the two row tiles of one pair and one column tile, and a phantom only where
//   the row tiles are odd (it loads its peer's x box);
// - the ring protocol of two CTAs whose stages are filled partly by the peer's multicast, run against a
//   model of mbarrier phases with transaction counts under random interleavings of the two producers,
//   the sixteen consumer warps, their wgmma groups' completions and the TMA landings: no box is issued
//   into or lands in a stage a wgmma group still reads, every consumer reads its use's data in all three boxes, every full barrier's phase ends at
//   a transaction count of zero, and the run ends. Four planted bugs must be caught (a test that cannot
//   fail proves nothing).
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "arch/tma_plan.hpp"
#include "ops/gemm_swiglu_plan.hpp"

namespace {

using namespace yoco::cuda::gemm_swiglu;
namespace tma = yoco::cuda::tma;

TEST(GemmSwigluPairs, TheScheduleGivesEveryTileToOneCtaOfAPair) {
  for (int64_t tm : {1, 2, 3, 8, 9, 17, 256})
    for (int64_t tn : {1, 6, 64}) {
      std::set<std::pair<int64_t, int64_t>> seen;
      int64_t phantoms = 0;
      for (int64_t pt = 0; pt < pair_tiles(tm, tn); ++pt) {
        const TileCoord a = pair_tile_coord(pt, tm, tn, 0), b = pair_tile_coord(pt, tm, tn, 1);
        ASSERT_EQ(a.n, b.n) << "one column tile, so one weight tile, a pair";
        ASSERT_EQ(a.m % 2, 0);
        ASSERT_EQ(b.m, a.m + 1);
        for (const TileCoord& c : {a, b}) {
          ASSERT_GE(c.n, 0);
          ASSERT_LT(c.n, tn);
          if (c.m == tm) {  // rank 1 past the last row tile
            ASSERT_EQ(tm % 2, 1) << tm;
            ++phantoms;
            continue;
          }
          ASSERT_LT(c.m, tm);
          ASSERT_TRUE(seen.insert({c.m, c.n}).second) << tm << "x" << tn << " pair " << pt;
        }
      }
      EXPECT_EQ(static_cast<int64_t>(seen.size()), tm * tn);
      EXPECT_EQ(phantoms, tm % 2 == 1 ? tn : 0);
    }
  // The weight halves: rank 0 W1's rows, rank 1 W3's (the W1|W3 weight has F rows of W1 first).
  EXPECT_EQ(pair_weight_row(3, 8192, 0), 3 * kTileCols);
  EXPECT_EQ(pair_weight_row(3, 8192, 1), 8192 + 3 * kTileCols);
  // A phantom loads its peer's x box (in bounds), every other CTA its own: M's limit is the one-CTA kernel's.
  EXPECT_EQ(x_row_tile(2, 3), 2);
  EXPECT_EQ(x_row_tile(3, 3), 2);
  constexpr int64_t kInt32 = (int64_t{1} << 31) - 1;
  EXPECT_EQ(unsupported(Shape{kInt32 - kTileRows, 64, 128, 64, 128}), nullptr);
  EXPECT_NE(unsupported(Shape{kInt32 - kTileRows + 1, 64, 128, 64, 128}), nullptr);
}

// An mbarrier as PTX ISA 8.x defines it: a phase completes when its pending arrivals reach zero and
// its transaction count is zero. arrive.expect_tx raises the count, complete_tx (a TMA's bytes landing)
// lowers it, and may do so before the expect_tx of the same phase (then the count is below zero for a
// while; the phase cannot complete, an arrival still pending). try_wait.parity(P) succeeds iff the phase
// of parity P has completed; a fresh barrier is in phase 0.
struct TxBarrier {
  int expected = 1, pending = 1;
  int64_t tx = 0, completed = 0;
  std::vector<std::string>* faults = nullptr;
  void init(int arrivals, std::vector<std::string>* f) {
    expected = pending = arrivals;
    faults = f;
  }
  void settle() {
    if (pending == 0 && tx == 0) {
      ++completed;
      pending = expected;
    } else if (pending == 0 && tx < 0) {
      faults->push_back("a phase's arrivals are in with more bytes landed than expected");
    }
  }
  void arrive(int64_t expect_bytes = 0) {
    if (pending == 0) faults->push_back("an arrival on a barrier with none pending");
    tx += expect_bytes;
    --pending;
    settle();
  }
  void complete_tx(int64_t bytes) {
    tx -= bytes;
    settle();
  }
  bool try_wait(uint32_t parity) const { return static_cast<uint32_t>(completed & 1) != parity; }
};

// The planted bugs: the empty barrier counting one CTA's warps while both arrive; the one-CTA kernel's
// release (own CTA only, eight arrivals) kept for pairs; a producer that does not wait for the release;
// a consumer that releases a stage without waiting for the wgmma group reading it (wait_group dropped).
enum class Bug {
  none,
  one_cta_release_count,
  one_cta_kernels_release,
  producer_skips_empty_wait,
  release_before_wgmma_done
};

// The protocol of gemm_swiglu_kernel<2>, step by step as the kernel runs it (the plan's arithmetic:
// ring_stage, the parities, empty_arrivals, kStageBytes and the box sizes), under one random schedule.
// Returns the faults seen (none: the run ended with every use consumed and nothing broken).
std::vector<std::string> run_pair_protocol(int64_t units, int64_t k_blocks, uint32_t seed, Bug bug) {
  constexpr int kCtas = kPairCtas, kRegions = 3;  // x's box, W1's box, W3's box of a stage
  std::vector<std::string> faults;
  std::mt19937 rng(seed);
  const int64_t uses = units * k_blocks;
  const bool pair_count = bug != Bug::one_cta_release_count && bug != Bug::one_cta_kernels_release;
  const int release_count = pair_count ? empty_arrivals(kCtas) : empty_arrivals(1);
  const bool early = bug == Bug::release_before_wgmma_done;

  std::array<std::array<TxBarrier, kStages>, kCtas> full, empty;
  // Which use's data each region of each stage of each CTA holds (-1: none yet), and how many wgmma
  // groups of that CTA's consumer warps are reading each stage (issued, not yet complete).
  std::array<std::array<std::array<int64_t, kRegions>, kStages>, kCtas> data;
  std::array<std::array<int, kStages>, kCtas> readers{};
  for (int r = 0; r < kCtas; ++r)
    for (int s = 0; s < kStages; ++s) {
      full[r][s].init(1, &faults);
      empty[r][s].init(release_count, &faults);
      data[r][s].fill(-1);
    }

  struct Landing {  // a TMA box in flight: into CTA cta's stage, region, of use `use`
    int cta, stage, region;
    int64_t use, bytes;
  };
  std::vector<Landing> in_flight;
  std::array<int64_t, kCtas> filled{};
  // A consumer warp runs the kernel's program order: wait for use u's stage and issue its wgmma group
  // (its reads of the stage in flight until the group completes, an event of its own); from a tile's
  // second block, wait_group 1 (use u - 1's group complete) and release u - 1; after a tile's last
  // block, wait_group 0 and release u. `next` is its next use, `reads` its groups in flight (oldest
  // first), `step` where it is: at a wait, at the release of the previous use, or of the last.
  enum class Step { wait, release_previous, release_last };
  struct Warp {
    int64_t next = 0;
    std::vector<int64_t> reads;
    Step step = Step::wait;
  };
  std::array<std::array<Warp, kConsumerWarps>, kCtas> warps;

  const auto release = [&](int cta, int64_t use) {
    const int s = tma::ring_stage(use, kStages);
    for (int q = 0; q < kCtas; ++q)
      if (bug != Bug::one_cta_kernels_release || q == cta) empty[q][s].arrive();
  };
  const auto in_flight_read = [](const Warp& wp, int64_t use) {
    for (int64_t u : wp.reads)
      if (u == use) return true;
    return false;
  };
  const auto enabled = [&](int r, const Warp& wp) {
    switch (wp.step) {
      case Step::wait:
        return wp.next < uses &&
               full[r][tma::ring_stage(wp.next, kStages)].try_wait(tma::full_parity(wp.next, kStages));
      case Step::release_previous: return early || !in_flight_read(wp, wp.next - 2);
      case Step::release_last: return early || wp.reads.empty();
    }
    return false;
  };
  // A box about to be written into a stage that a wgmma group still reads.
  const auto check_no_reader = [&](int cta, int stage, int64_t use, const char* when) {
    if (readers[cta][stage] != 0)
      faults.push_back("use " + std::to_string(use) + " " + when + " CTA " + std::to_string(cta) + "'s stage " +
                       std::to_string(stage) + " while a wgmma group reads it");
  };
  int64_t steps = 0;
  for (;;) {
    if (!faults.empty() || ++steps > 1000000) break;
    // Everything enabled now, one picked at random.
    // 0..kCtas-1: producer r; 100 + i: landing i; 1000 + r * 100 + w: warp w of r's next step;
    // 5000 + r * 100 + w: the completion of warp w of r's oldest wgmma group.
    std::vector<int> choices;
    for (int r = 0; r < kCtas; ++r)
      if (filled[r] < uses &&
          (bug == Bug::producer_skips_empty_wait ||
           empty[r][tma::ring_stage(filled[r], kStages)].try_wait(tma::empty_parity(filled[r], kStages))))
        choices.push_back(r);
    for (size_t i = 0; i < in_flight.size(); ++i) choices.push_back(100 + static_cast<int>(i));
    bool done = true;
    for (int r = 0; r < kCtas; ++r)
      for (int w = 0; w < kConsumerWarps; ++w) {
        const Warp& wp = warps[r][w];
        if (enabled(r, wp)) choices.push_back(1000 + r * 100 + w);
        if (!wp.reads.empty()) choices.push_back(5000 + r * 100 + w);  // its oldest group completes
        if (wp.next < uses || !wp.reads.empty() || wp.step != Step::wait) done = false;
      }
    if (done && in_flight.empty()) break;
    if (choices.empty()) {
      faults.push_back("deadlock at step " + std::to_string(steps));
      break;
    }
    const int pick = choices[std::uniform_int_distribution<size_t>(0, choices.size() - 1)(rng)];
    if (pick < 100) {  // producer r: expect_tx on its own full barrier, then its x box and its weight half
      const int r = pick;
      const int64_t u = filled[r]++;
      const int s = tma::ring_stage(u, kStages);
      full[r][s].arrive(kStageBytes);
      check_no_reader(r, s, u, "is issued into");
      in_flight.push_back({r, s, 0, u, kABytes});
      for (int q = 0; q < kCtas; ++q)  // multicast: one landing per CTA of the mask
        if (kPairMask & (1u << q)) {
          check_no_reader(q, s, u, "is issued into");
          in_flight.push_back({q, s, 1 + r, u, kBHalfBytes});
        }
    } else if (pick < 1000) {  // a box lands
      const Landing l = in_flight[static_cast<size_t>(pick - 100)];
      in_flight.erase(in_flight.begin() + (pick - 100));
      check_no_reader(l.cta, l.stage, l.use, "lands in");
      if (data[l.cta][l.stage][l.region] != (l.use >= kStages ? l.use - kStages : -1))
        faults.push_back("use " + std::to_string(l.use) + " overwrites use " +
                         std::to_string(data[l.cta][l.stage][l.region]) + " in CTA " + std::to_string(l.cta));
      data[l.cta][l.stage][l.region] = l.use;
      full[l.cta][l.stage].complete_tx(l.bytes);
    } else if (pick >= 5000) {  // a wgmma group completes: its reads of the stage are done
      Warp& wp = warps[(pick - 5000) / 100][(pick - 5000) % 100];
      --readers[(pick - 5000) / 100][tma::ring_stage(wp.reads.front(), kStages)];
      wp.reads.erase(wp.reads.begin());
    } else {  // a consumer warp's next step
      const int r = (pick - 1000) / 100, w = (pick - 1000) % 100;
      Warp& wp = warps[r][w];
      const int64_t last = wp.next - 1;  // the use it issued last
      switch (wp.step) {
        case Step::wait: {
          const int64_t u = wp.next++;
          const int s = tma::ring_stage(u, kStages);
          for (int region = 0; region < kRegions; ++region)
            if (data[r][s][region] != u)
              faults.push_back("CTA " + std::to_string(r) + " reads use " + std::to_string(u) + " with region " +
                               std::to_string(region) + " holding use " + std::to_string(data[r][s][region]));
          if (full[r][s].tx != 0)
            faults.push_back("a full phase completed at a transaction count of " + std::to_string(full[r][s].tx));
          ++readers[r][s];
          wp.reads.push_back(u);
          wp.step = u % k_blocks != 0         ? Step::release_previous
                    : (u + 1) % k_blocks == 0 ? Step::release_last
                                              : Step::wait;
          break;
        }
        case Step::release_previous:  // wait_group 1, then the previous block's stage
          release(r, last - 1);
          wp.step = (last + 1) % k_blocks == 0 ? Step::release_last : Step::wait;
          break;
        case Step::release_last:  // after the tile's last block: wait_group 0, then its stage
          release(r, last);
          wp.step = Step::wait;
          break;
      }
    }
  }
  if (faults.empty() && steps > 1000000) faults.push_back("no end after 10^6 steps");
  return faults;
}

TEST(GemmSwigluPairs, TheRingProtocolHoldsUnderRandomInterleavings) {
  for (const auto& [units, k_blocks] : {std::pair<int64_t, int64_t>{1, 1}, {1, 3}, {3, 2}, {2, 7}, {5, 4}})
    for (uint32_t seed = 1; seed <= 200; ++seed) {
      const std::vector<std::string> f = run_pair_protocol(units, k_blocks, seed, Bug::none);
      ASSERT_TRUE(f.empty()) << units << " units x " << k_blocks << " blocks, seed " << seed << ": " << f.front();
    }
}

TEST(GemmSwigluPairs, TheModelCatchesPlantedBugs) {
  for (const Bug bug : {Bug::one_cta_release_count, Bug::one_cta_kernels_release, Bug::producer_skips_empty_wait,
                        Bug::release_before_wgmma_done}) {
    int caught = 0;
    for (uint32_t seed = 1; seed <= 200; ++seed)
      if (!run_pair_protocol(3, 6, seed, bug).empty()) ++caught;
    EXPECT_GT(caught, 0) << "planted bug " << static_cast<int>(bug) << " never caught";
  }
}

}  // namespace

#include "analysis/alignment.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"
#include "tests/test_time.h"
#include "xspace/xspace.h"

using ::profctl::testkit::IsOk;

namespace profctl::analysis {
namespace {

using ::testing::HasSubstr;

using ::profctl::test_time::kMs;
using ::profctl::test_time::kT0;
using ::profctl::test_time::kUs;

// A simulated pod: collective k ends at one true instant T_k on every host; host h stamps it
// T_k + true_offset[h] (+ per-host jitter), once per GPU.
struct Pod {
  int64_t period_ns = 100 * kMs;
  int64_t steps = 50;
  int64_t jitter_ns = 30 * kUs;  // each host's end is off by up to this, uniformly
  int gpus = 2;
  uint32_t seed = 7;

  // True end instants: a fixed grid with +-5% step-to-step variation (real steps vary).
  std::vector<int64_t> TrueEnds() const {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int64_t> wobble(-period_ns / 20, period_ns / 20);
    std::vector<int64_t> ends;
    for (int64_t k = 0; k < steps; ++k) ends.push_back(kT0 + k * period_ns + wobble(rng));
    return ends;
  }

  // One host's ends for the true steps in `which` (all when empty), in agent-clock ns.
  std::vector<int64_t> HostEnds(int64_t true_offset_ns, uint32_t host_seed,
                                const std::set<int64_t>& which = {}) const {
    const std::vector<int64_t> truth = TrueEnds();
    std::mt19937_64 rng(seed * 1000 + host_seed);
    std::uniform_int_distribution<int64_t> jitter(-jitter_ns, jitter_ns);
    std::uniform_int_distribution<int64_t> gpu_skew(0, 3 * kUs);
    std::vector<int64_t> ends;
    for (size_t k = 0; k < truth.size(); ++k) {
      if (!which.empty() && !which.contains(static_cast<int64_t>(k))) continue;
      const int64_t end = truth[k] + true_offset_ns + jitter(rng);
      for (int g = 0; g < gpus; ++g) ends.push_back(end + gpu_skew(rng));
    }
    // Out of order, as a trace may list them.
    std::shuffle(ends.begin(), ends.end(), rng);
    return ends;
  }
};

HostClockInput Host(int64_t true_offset_ns, int64_t rtt_error_ns, int64_t uncertainty_ns,
                    std::vector<int64_t> ends) {
  return {true_offset_ns + rtt_error_ns, uncertainty_ns, std::move(ends)};
}

TEST(AlignmentTest, RecoversInjectedOffsetsFromCollectiveEnds) {
  const Pod pod;
  const std::vector<int64_t> truth = {-1537 * kMs, 263 * kMs, 4011 * kMs, 0};
  // Asymmetric routes: each RTT offset is off by several ms, inside its +-RTT/2 bound. The last
  // host is next to the coordinator (RTT 40 us): it pins the common part.
  const std::vector<HostClockInput> hosts = {
      Host(truth[0], 3'200 * kUs, 5 * kMs, pod.HostEnds(truth[0], 1)),
      Host(truth[1], -2'700 * kUs, 4 * kMs, pod.HostEnds(truth[1], 2)),
      Host(truth[2], 4'100 * kUs, 6 * kMs, pod.HostEnds(truth[2], 3)),
      Host(truth[3], 5 * kUs, 20 * kUs, pod.HostEnds(truth[3], 4)),
  };
  absl::StatusOr<std::vector<HostOffset>> got = RefineOffsets(hosts);
  ASSERT_THAT(got, IsOk());
  ASSERT_EQ(got->size(), hosts.size());
  for (size_t i = 0; i < hosts.size(); ++i) {
    const HostOffset& h = (*got)[i];
    SCOPED_TRACE(i);
    EXPECT_EQ(h.method, OffsetMethod::kCollectives);
    EXPECT_NEAR(h.offset_ns, truth[i], 100 * kUs);
    EXPECT_EQ(h.matched, pod.steps);
    EXPECT_LT(h.residual_ns, pod.jitter_ns);
    EXPECT_GT(h.residual_ns, 0);
    EXPECT_FALSE(h.clamped);
    EXPECT_EQ(h.ignored_ends, 0);
    EXPECT_EQ(h.ends, pod.steps);  // one per collective, however many GPUs
    EXPECT_LE(std::abs(h.offset_ns - hosts[i].rtt_offset_ns), hosts[i].rtt_uncertainty_ns);
  }
  EXPECT_EQ(OffsetMethodName((*got)[0].method), "collectives");
}

TEST(AlignmentTest, RelativeOffsetsAreExactEvenWhenOnlyLooseRttBoundsExist) {
  const Pod pod;
  const std::vector<int64_t> truth = {-1537 * kMs, 263 * kMs, 4011 * kMs};
  const std::vector<HostClockInput> hosts = {
      Host(truth[0], 3'200 * kUs, 5 * kMs, pod.HostEnds(truth[0], 1)),
      Host(truth[1], -2'700 * kUs, 4 * kMs, pod.HostEnds(truth[1], 2)),
      Host(truth[2], 4'100 * kUs, 6 * kMs, pod.HostEnds(truth[2], 3)),
  };
  absl::StatusOr<std::vector<HostOffset>> got = RefineOffsets(hosts);
  ASSERT_THAT(got, IsOk());
  // What alignment needs: hosts against each other, to the end jitter...
  for (size_t a = 0; a < hosts.size(); ++a) {
    for (size_t b = a + 1; b < hosts.size(); ++b) {
      EXPECT_NEAR((*got)[a].offset_ns - (*got)[b].offset_ns, truth[a] - truth[b], 100 * kUs);
    }
  }
  // ... while the common part stays as good as the RTT bounds (the intersection here is
  // 3.5 ms wide), never outside any of them.
  for (size_t i = 0; i < hosts.size(); ++i) {
    EXPECT_LE(std::abs((*got)[i].offset_ns - hosts[i].rtt_offset_ns), hosts[i].rtt_uncertainty_ns);
    EXPECT_NEAR((*got)[i].offset_ns, truth[i], 3'500 * kUs);
  }
}

TEST(AlignmentTest, RttErrorsCloseToTheCollectiveSpacingStillMatchTheRightStep) {
  // Collectives every 10 ms with RTT errors of +-4 ms: plain nearest-neighbour matching on the
  // RTT-translated ends would need a tolerance above 8 ms, i.e. next steps. Voting finds them.
  Pod pod;
  pod.period_ns = 10 * kMs;
  pod.steps = 200;
  const std::vector<int64_t> truth = {250 * kMs, -90 * kMs, 12 * kMs, 0};
  const std::vector<HostClockInput> hosts = {
      Host(truth[0], 4 * kMs, 4'500 * kUs, pod.HostEnds(truth[0], 1)),
      Host(truth[1], -4 * kMs, 4'500 * kUs, pod.HostEnds(truth[1], 2)),
      Host(truth[2], 3'900 * kUs, 4'500 * kUs, pod.HostEnds(truth[2], 3)),
      Host(truth[3], 10 * kUs, 30 * kUs, pod.HostEnds(truth[3], 4)),
  };
  absl::StatusOr<std::vector<HostOffset>> got = RefineOffsets(hosts);
  ASSERT_THAT(got, IsOk());
  for (size_t i = 0; i < hosts.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ((*got)[i].method, OffsetMethod::kCollectives);
    EXPECT_NEAR((*got)[i].offset_ns, truth[i], 100 * kUs);
    EXPECT_EQ((*got)[i].matched, pod.steps);
  }
}

// Ends on a perfectly regular grid (a job whose steps all take the same time, to the end jitter),
// `n` steps from step `first`.
std::vector<int64_t> PeriodicGridEnds(int64_t offset_ns, int first, int n, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> jitter(-30 * kUs, 30 * kUs);
  std::vector<int64_t> ends;
  for (int k = first; k < first + n; ++k) {
    ends.push_back(kT0 + k * 50 * kMs + offset_ns + jitter(rng));
  }
  return ends;
}

TEST(AlignmentTest, ARegularGridWithStaggeredWindowsMatchesTheStepTheRttEstimatesSay) {
  // Every 50 ms step ends alike, so every multiple of 50 ms is an equally tight fit, and a host
  // whose window starts 1-3 steps after the reference's has 1-3 more pairs at the neighbour
  // steps than at its own (its window's end reaches past the reference's). Voting by pairs alone
  // picked those (a whole step off, inside RTT bounds of 40-100 ms); the RTT estimates, off by
  // less than half a step, say which.
  int cases = 0;
  for (uint32_t seed = 1; seed <= 5; ++seed) {
    for (const int64_t u : {40 * kMs, 100 * kMs}) {
      for (const int64_t err : {-20 * kMs, -5 * kMs, 5 * kMs, 20 * kMs}) {
        for (int stagger = 0; stagger <= 3; ++stagger) {
          SCOPED_TRACE(absl::StrCat("seed ", seed, ", u ", u / kMs, " ms, RTT error ", err / kMs,
                                    " ms, window ", stagger, " steps later"));
          const std::vector<int64_t> truth = {0, 7 * kMs, -13 * kMs};
          const std::vector<HostClockInput> hosts = {
              Host(truth[0], 0, u, PeriodicGridEnds(truth[0], 0, 20, seed)),
              Host(truth[1], err, u, PeriodicGridEnds(truth[1], stagger, 20, seed + 100)),
              Host(truth[2], -err / 2, u, PeriodicGridEnds(truth[2], 0, 20, seed + 200)),
          };
          absl::StatusOr<std::vector<HostOffset>> got = RefineOffsets(hosts);
          ASSERT_THAT(got, IsOk());
          for (size_t i = 0; i < hosts.size(); ++i) {
            EXPECT_EQ((*got)[i].method, OffsetMethod::kCollectives) << i;
          }
          EXPECT_NEAR((*got)[1].offset_ns - (*got)[0].offset_ns, truth[1] - truth[0], 100 * kUs);
          EXPECT_NEAR((*got)[2].offset_ns - (*got)[0].offset_ns, truth[2] - truth[0], 100 * kUs);
          ++cases;
        }
      }
    }
  }
  EXPECT_EQ(cases, 5 * 2 * 4 * 4);
}

TEST(AlignmentTest, HostsWithoutEnoughCollectivesKeepTheirRttOffset) {
  const Pod pod;
  const std::vector<HostClockInput> hosts = {
      Host(10 * kMs, 1 * kMs, 2 * kMs, pod.HostEnds(10 * kMs, 1)),
      Host(-20 * kMs, -1 * kMs, 2 * kMs, {}),                               // no collectives
      Host(30 * kMs, 1 * kMs, 2 * kMs, pod.HostEnds(30 * kMs, 3, {4, 9})),  // only two
      Host(0, 0, 100 * kUs, pod.HostEnds(0, 4)),
  };
  absl::StatusOr<std::vector<HostOffset>> got = RefineOffsets(hosts);
  ASSERT_THAT(got, IsOk());
  EXPECT_EQ((*got)[0].method, OffsetMethod::kCollectives);
  EXPECT_EQ((*got)[3].method, OffsetMethod::kCollectives);
  EXPECT_NEAR((*got)[0].offset_ns, 10 * kMs, 100 * kUs);
  for (size_t i : {1, 2}) {
    SCOPED_TRACE(i);
    EXPECT_EQ((*got)[i].method, OffsetMethod::kRtt);
    EXPECT_EQ(OffsetMethodName((*got)[i].method), "rtt");
    EXPECT_EQ((*got)[i].offset_ns, hosts[i].rtt_offset_ns);
    EXPECT_EQ((*got)[i].residual_ns, 0);
  }
  EXPECT_EQ((*got)[1].matched, 0);
  EXPECT_EQ((*got)[2].matched, 2);

  // No host with collectives at all: everything is RTT.
  std::vector<HostClockInput> none = {Host(5, 0, 1, {}), Host(-5, 0, 1, {})};
  got = RefineOffsets(none);
  ASSERT_THAT(got, IsOk());
  EXPECT_EQ((*got)[0].method, OffsetMethod::kRtt);
  EXPECT_EQ((*got)[1].offset_ns, -5);
}

// Three hosts whose all-reduces coincide, and one on another step grid (a shorter period, so it
// has the most collective ends) whose collectives coincide with no one's: the three align on
// their collectives, whatever the input order, and the odd one keeps its RTT offset.
TEST(AlignmentTest, AHostOnAnotherStepGridDoesNotBecomeTheReference) {
  const Pod pod;  // 50 steps of 100 ms
  Pod other;
  other.period_ns = 70 * kMs;  // 72 steps over the same 5 s
  other.steps = 72;
  other.seed = 23;
  const std::vector<int64_t> truth = {-1537 * kMs, 263 * kMs, 0};
  const int64_t odd_truth = 91 * kMs;
  const HostClockInput odd = Host(odd_truth, 1'500 * kUs, 2 * kMs, other.HostEnds(odd_truth, 9));
  const std::vector<HostClockInput> agreeing = {
      Host(truth[0], 1'200 * kUs, 2 * kMs, pod.HostEnds(truth[0], 1)),
      Host(truth[1], -1'700 * kUs, 2 * kMs, pod.HostEnds(truth[1], 2)),
      Host(truth[2], 5 * kUs, 20 * kUs, pod.HostEnds(truth[2], 3)),
  };
  for (const bool odd_first : {false, true}) {
    SCOPED_TRACE(odd_first ? "odd host first" : "odd host last");
    std::vector<HostClockInput> hosts = agreeing;
    hosts.insert(odd_first ? hosts.begin() : hosts.end(), odd);
    const size_t odd_index = odd_first ? 0 : hosts.size() - 1;
    const size_t first_agreeing = odd_first ? 1 : 0;
    absl::StatusOr<std::vector<HostOffset>> got = RefineOffsets(hosts);
    ASSERT_THAT(got, IsOk());
    ASSERT_EQ(got->size(), hosts.size());
    for (size_t k = 0; k < agreeing.size(); ++k) {
      SCOPED_TRACE(k);
      const HostOffset& h = (*got)[first_agreeing + k];
      EXPECT_EQ(h.method, OffsetMethod::kCollectives);
      EXPECT_NEAR(h.offset_ns, truth[k], 100 * kUs);
      EXPECT_EQ(h.matched, pod.steps);
      EXPECT_LT(h.residual_ns, pod.jitter_ns);
    }
    const HostOffset& o = (*got)[odd_index];
    EXPECT_EQ(o.method, OffsetMethod::kRtt);
    EXPECT_EQ(o.offset_ns, odd.rtt_offset_ns);
    EXPECT_LT(o.matched, AlignmentOptions().min_matches);
    EXPECT_EQ(o.residual_ns, 0);
  }
}

// With RTT bounds of several ms the search window spans several ms too, and two grids that do
// not agree still line up now and then: a handful of chance coincidences out of dozens of ends
// refine no one.
TEST(AlignmentTest, ChanceCoincidencesWithAnotherStepGridRefineNoOne) {
  const Pod pod;
  const std::vector<int64_t> truth = {-1537 * kMs, 263 * kMs, 4011 * kMs, 0};
  for (const uint32_t seed : {23u, 24u, 25u, 26u, 27u}) {
    SCOPED_TRACE(seed);
    Pod other;
    other.period_ns = 60 * kMs;
    other.steps = 83;
    other.seed = seed;
    const int64_t odd_truth = 91 * kMs;
    const std::vector<HostClockInput> hosts = {
        Host(truth[0], 3'200 * kUs, 5 * kMs, pod.HostEnds(truth[0], 1)),
        Host(truth[1], -2'700 * kUs, 5 * kMs, pod.HostEnds(truth[1], 2)),
        Host(odd_truth, -4 * kMs, 5 * kMs, other.HostEnds(odd_truth, 9)),
        Host(truth[3], 4'100 * kUs, 5 * kMs, pod.HostEnds(truth[3], 4)),
    };
    absl::StatusOr<std::vector<HostOffset>> got = RefineOffsets(hosts);
    ASSERT_THAT(got, IsOk());
    for (size_t i : {0, 1, 3}) {
      SCOPED_TRACE(i);
      EXPECT_EQ((*got)[i].method, OffsetMethod::kCollectives);
      EXPECT_EQ((*got)[i].matched, pod.steps);
    }
    EXPECT_EQ((*got)[2].method, OffsetMethod::kRtt) << "matched " << (*got)[2].matched;
    EXPECT_EQ((*got)[2].offset_ns, hosts[2].rtt_offset_ns);
  }
}

TEST(AlignmentTest, ExtraAndMissingStepsStillMatch) {
  Pod pod;
  pod.steps = 60;
  const std::vector<int64_t> truth = {777 * kMs, -3 * kMs, 0};
  std::set<int64_t> first, second, third;
  for (int64_t k = 0; k < 50; ++k) first.insert(k);  // steps 0..49
  for (int64_t k = 5; k < 60; ++k) {                 // started late, lost three
    if (k != 20 && k != 21 && k != 30) second.insert(k);
  }
  for (int64_t k = 0; k < 60; k += 2) third.insert(k);  // every other step only
  const std::vector<HostClockInput> hosts = {
      Host(truth[0], 2 * kMs, 3 * kMs, pod.HostEnds(truth[0], 1, first)),
      Host(truth[1], -2 * kMs, 3 * kMs, pod.HostEnds(truth[1], 2, second)),
      Host(truth[2], 10 * kUs, 20 * kUs, pod.HostEnds(truth[2], 3, third)),
  };
  absl::StatusOr<std::vector<HostOffset>> got = RefineOffsets(hosts);
  ASSERT_THAT(got, IsOk());
  for (size_t i = 0; i < hosts.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ((*got)[i].method, OffsetMethod::kCollectives);
    EXPECT_NEAR((*got)[i].offset_ns, truth[i], 100 * kUs);
  }
  // The reference is the host with the most ends (the second: 52 steps). The first shares
  // steps 5..49 with it except 20, 21 and 30; the third, the even ones of 6..58 except 20, 30.
  EXPECT_EQ((*got)[0].matched, 42);
  EXPECT_EQ((*got)[2].matched, 25);
  EXPECT_EQ((*got)[1].matched, 42 + 5);  // the reference: steps any other host matched
}

TEST(AlignmentTest, AnRttBoundThatDoesNotHoldIsClamped) {
  const Pod pod;
  const std::vector<int64_t> truth = {40 * kMs, -70 * kMs, 5 * kMs, 0};
  const std::vector<HostClockInput> hosts = {
      Host(truth[0], 1 * kMs, 2 * kMs, pod.HostEnds(truth[0], 1)),
      Host(truth[1], -1 * kMs, 2 * kMs, pod.HostEnds(truth[1], 2)),
      // Claims +-1 ms but is 1.8 ms off (say its clock stepped after clock sync).
      Host(truth[2], 1'800 * kUs, 1 * kMs, pod.HostEnds(truth[2], 3)),
      Host(truth[3], 100 * kUs, 200 * kUs, pod.HostEnds(truth[3], 4)),
  };
  absl::StatusOr<std::vector<HostOffset>> got = RefineOffsets(hosts);
  ASSERT_THAT(got, IsOk());
  // The consistent group (the most intervals, then the most weight) decides the anchor; they
  // come out right.
  for (size_t i : {0, 1, 3}) {
    SCOPED_TRACE(i);
    EXPECT_EQ((*got)[i].method, OffsetMethod::kCollectives);
    EXPECT_NEAR((*got)[i].offset_ns, truth[i], 200 * kUs);
    EXPECT_FALSE((*got)[i].clamped);
  }
  // The inconsistent host is held to the bound it claimed.
  EXPECT_TRUE((*got)[2].clamped);
  EXPECT_EQ((*got)[2].method, OffsetMethod::kCollectives);
  EXPECT_EQ((*got)[2].offset_ns, hosts[2].rtt_offset_ns - hosts[2].rtt_uncertainty_ns);
}

TEST(AlignmentTest, EmptyAndSingleHostInputs) {
  absl::StatusOr<std::vector<HostOffset>> got = RefineOffsets({});
  ASSERT_THAT(got, IsOk());
  EXPECT_TRUE(got->empty());

  const Pod pod;
  const std::vector<HostClockInput> one = {Host(5 * kMs, 1 * kMs, 2 * kMs, pod.HostEnds(0, 1))};
  got = RefineOffsets(one);
  ASSERT_THAT(got, IsOk());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].method, OffsetMethod::kRtt);  // nothing to compare against
  EXPECT_EQ((*got)[0].offset_ns, 6 * kMs);
}

TEST(AlignmentTest, AbsurdInputsAreRejectedOrIgnoredWithoutOverflow) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  const Pod pod;
  std::vector<HostClockInput> hosts = {Host(0, 0, 1 * kMs, pod.HostEnds(0, 1)),
                                       Host(0, 0, 1 * kMs, pod.HostEnds(0, 2))};

  hosts[1].rtt_offset_ns = kMax;
  absl::StatusOr<std::vector<HostOffset>> got = RefineOffsets(hosts);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(got.status().message(), HasSubstr("host #1 rtt_offset_ns 9223372036854775807"));
  hosts[1].rtt_offset_ns = kMin;
  EXPECT_FALSE(RefineOffsets(hosts).ok());
  hosts[1].rtt_offset_ns = 0;
  hosts[0].rtt_uncertainty_ns = -1;
  EXPECT_THAT(RefineOffsets(hosts).status().message(), HasSubstr("host #0 rtt_uncertainty_ns -1"));
  hosts[0].rtt_uncertainty_ns = kMax;
  EXPECT_FALSE(RefineOffsets(hosts).ok());

  // Largest accepted values, and end times from a hostile trace: no overflow (UBSan checks),
  // the results stay inside the RTT bounds.
  hosts[0] = Host(kMaxAbsOffsetNs, 0, kMaxAbsOffsetNs, pod.HostEnds(0, 1));
  hosts[0].collective_ends_ns.insert(hosts[0].collective_ends_ns.end(),
                                     {kMax, kMin, kMax - 1, kMaxAbsTimeNs + 1});
  hosts[1] = Host(-kMaxAbsOffsetNs, 0, kMaxAbsOffsetNs, pod.HostEnds(0, 2));
  hosts[1].collective_ends_ns.push_back(kMaxAbsTimeNs);
  hosts[1].collective_ends_ns.push_back(-kMaxAbsTimeNs);
  got = RefineOffsets(hosts);
  ASSERT_THAT(got, IsOk());
  EXPECT_EQ((*got)[0].ignored_ends, 4);
  // +-kMaxAbsTimeNs are in range, but over 2^61 from the rest of host 1's ends.
  EXPECT_EQ((*got)[0].ends, pod.steps);
  EXPECT_EQ((*got)[1].ignored_ends, 2);
  EXPECT_EQ((*got)[1].ends, pod.steps);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_GE((*got)[i].offset_ns, hosts[i].rtt_offset_ns - hosts[i].rtt_uncertainty_ns);
    EXPECT_LE((*got)[i].offset_ns, hosts[i].rtt_offset_ns + hosts[i].rtt_uncertainty_ns);
  }

  AlignmentOptions bad;
  bad.min_matches = 0;
  EXPECT_THAT(RefineOffsets(hosts, bad).status().message(), HasSubstr("min_matches=0"));
  bad = {};
  bad.min_match_percent = 101;
  EXPECT_THAT(RefineOffsets(hosts, bad).status().message(), HasSubstr("min_match_percent=101"));
  bad = {};
  bad.max_search_ns = -1;
  EXPECT_THAT(RefineOffsets(hosts, bad).status().message(), HasSubstr("max_search_ns=-1"));
  bad = {};
  bad.max_match_tolerance_ns = 0;
  EXPECT_FALSE(RefineOffsets(hosts, bad).ok());
  bad = {};
  bad.dedupe_ns = kMax;
  EXPECT_FALSE(RefineOffsets(hosts, bad).ok());
}

// Ends at the very edges of the accepted range, next to each other: their difference (2^63)
// does not fit an int64. Nothing overflows (UBSan aborts on it here), and an end more than 2^61
// from the rest of its host's ends is out of range.
TEST(AlignmentTest, EndsAtTheEdgesOfTheRangeNeverOverflow) {
  Pod pod;
  pod.steps = 20;
  std::vector<HostClockInput> hosts = {Host(0, 0, 1 * kMs, pod.HostEnds(0, 1)),
                                       Host(0, 0, 1 * kMs, pod.HostEnds(0, 2)),
                                       Host(0, 0, 1 * kMs, {-kMaxAbsTimeNs, kMaxAbsTimeNs})};
  // A host whose ends include both edges beside its pod's.
  hosts[1].collective_ends_ns.push_back(-kMaxAbsTimeNs);
  hosts[1].collective_ends_ns.push_back(kMaxAbsTimeNs);
  absl::StatusOr<std::vector<HostOffset>> got = RefineOffsets(hosts);
  ASSERT_THAT(got, IsOk());
  EXPECT_EQ((*got)[0].method, OffsetMethod::kCollectives);
  EXPECT_EQ((*got)[1].method, OffsetMethod::kCollectives);
  EXPECT_EQ((*got)[1].ends, pod.steps);
  EXPECT_EQ((*got)[1].ignored_ends, 2);  // both edges are over 2^61 from its pod's ends
  EXPECT_EQ((*got)[2].ends, 1);          // its median is the lower edge: the upper is 2^63 away
  EXPECT_EQ((*got)[2].ignored_ends, 1);
  EXPECT_EQ((*got)[2].method, OffsetMethod::kRtt);

  // A whole pod at the lower edge, a host of it with one end at the upper edge: its offsets are
  // the ones its ends say (host h ends h us after the truth).
  std::vector<HostClockInput> edge;
  for (int64_t h = 1; h <= 3; ++h) {
    std::vector<int64_t> ends;
    for (int64_t k = 0; k < 10; ++k) ends.push_back(-kMaxAbsTimeNs + k * 100 * kMs + h * kUs);
    edge.push_back(Host(0, 0, 1 * kMs, std::move(ends)));
  }
  edge[2].collective_ends_ns.push_back(kMaxAbsTimeNs);
  got = RefineOffsets(edge);
  ASSERT_THAT(got, IsOk());
  for (size_t i = 0; i < edge.size(); ++i) {
    EXPECT_EQ((*got)[i].ends, 10) << i;
    EXPECT_EQ((*got)[i].method, OffsetMethod::kCollectives) << i;
  }
  EXPECT_EQ((*got)[1].offset_ns - (*got)[0].offset_ns, 1 * kUs);
  EXPECT_EQ((*got)[2].offset_ns - (*got)[0].offset_ns, 2 * kUs);
  EXPECT_EQ((*got)[2].ignored_ends, 1);
}

// Hosts with a single end each at an edge of the range cannot take the honest hosts' ends away:
// each host's ends are judged against its own, never against a vote of the pod.
TEST(AlignmentTest, HostsWithOneFarEndDoNotOutvoteTheHonestOnes) {
  Pod pod;
  pod.steps = 20;
  std::vector<HostClockInput> hosts = {
      Host(0, 0, 1 * kMs, pod.HostEnds(0, 1)), Host(3 * kUs, 0, 1 * kMs, pod.HostEnds(3 * kUs, 2)),
      Host(0, 0, 1 * kMs, {-kMaxAbsTimeNs}), Host(0, 0, 1 * kMs, {-kMaxAbsTimeNs})};
  absl::StatusOr<std::vector<HostOffset>> got = RefineOffsets(hosts);
  ASSERT_THAT(got, IsOk());
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ((*got)[i].method, OffsetMethod::kCollectives) << i;
    EXPECT_EQ((*got)[i].ends, pod.steps) << i;
    EXPECT_EQ((*got)[i].ignored_ends, 0) << i;
  }
  EXPECT_NEAR(static_cast<double>((*got)[1].offset_ns - (*got)[0].offset_ns), 3.0 * kUs,
              2.0 * static_cast<double>(pod.jitter_ns));
  for (size_t i = 2; i < 4; ++i) {
    EXPECT_EQ((*got)[i].method, OffsetMethod::kRtt) << i;
    EXPECT_EQ((*got)[i].ends, 1) << i;
  }
}

TEST(AlignmentTest, AThousandHostsOfFiftySteps) {
  const Pod pod;
  std::mt19937_64 rng(99);
  std::uniform_int_distribution<int64_t> skew(-5'000 * kMs, 5'000 * kMs);
  std::uniform_int_distribution<int64_t> rtt_error(-4 * kMs, 4 * kMs);
  std::vector<HostClockInput> hosts;
  std::vector<int64_t> truth;
  for (uint32_t h = 0; h < 1000; ++h) {
    truth.push_back(h == 0 ? 0 : skew(rng));
    const int64_t err = h == 0 ? 5 * kUs : rtt_error(rng);
    hosts.push_back(
        Host(truth.back(), err, h == 0 ? 20 * kUs : 5 * kMs, pod.HostEnds(truth.back(), h + 1)));
  }
  absl::StatusOr<std::vector<HostOffset>> got = RefineOffsets(hosts);
  ASSERT_THAT(got, IsOk());
  int64_t worst = 0;
  for (size_t i = 0; i < hosts.size(); ++i) {
    ASSERT_EQ((*got)[i].method, OffsetMethod::kCollectives) << i;
    worst = std::max(worst, std::abs((*got)[i].offset_ns - truth[i]));
  }
  EXPECT_LT(worst, 100 * kUs);
}

// Builds a device plane with relative lines, as an agent writes it.
void AddGpu(xspace::XSpace* space, int gpu, int64_t profile_start,
            const std::vector<int64_t>& nccl_ends) {
  xspace::XPlaneBuilder b(space->add_planes(), gpu, absl::StrCat(xspace::kGpuPlanePrefix, gpu),
                          profile_start);
  xspace::XLine* compute = b.AddLine(7, "Stream #7(Compute)", profile_start);
  xspace::XLine* nccl = b.AddLine(21, "Stream #21(NCCL)", profile_start);
  for (const int64_t end : nccl_ends) {
    b.AddEvent(compute, b.EventMetadataId("sm90_xmma_gemm_bf16"), end - 5 * kMs, 3 * kMs);
    b.AddEvent(nccl, b.EventMetadataId("ncclDevKernel_AllReduce_Sum_bf16_RING_LL"), end - kMs, kMs);
    b.AddEvent(nccl, b.EventMetadataId("ncclDevKernel_SendRecv"), end + kMs, kMs);
  }
}

TEST(CollectiveEndsTest, ReadsDevicePlanesDedupesGpusAndSkipsOthers) {
  const int64_t start = kT0 + 263 * kMs;  // agent clock
  xspace::XSpace space;
  AddGpu(&space, 0, start, {start + 10 * kMs, start + 20 * kMs});
  AddGpu(&space, 1, start, {start + 10 * kMs + 2 * kUs, start + 20 * kMs + 1 * kUs});
  // Host-side API calls named like collectives do not count.
  xspace::XPlaneBuilder host(space.add_planes(), 49, xspace::kHostPlaneName, start);
  host.AddEvent(host.AddLine(1, "main", start), host.EventMetadataId("ncclAllReduce"),
                start + 1 * kMs, 10 * kUs);
  // TPU: XLA collective ops; the async start half does not count.
  xspace::XPlaneBuilder tpu(space.add_planes(), 100, "/device:TPU:0", start);
  xspace::XLine* ops = tpu.AddLine(2, "XLA Ops", start);
  tpu.AddEvent(ops, tpu.EventMetadataId("all-reduce-start.1"), start + 29 * kMs, kMs);
  tpu.AddEvent(ops, tpu.EventMetadataId("all-gather.3"), start + 30 * kMs, kMs);
  xspace::SetProfileWindow(&space, start, start + kMs * 1000);
  ASSERT_THAT(xspace::Validate(space), IsOk());

  // Each run of ends within dedupe_ns becomes its median (the lower middle of an even run).
  EXPECT_THAT(CollectiveEndsNs(space),
              ::testing::ElementsAre(start + 10 * kMs, start + 20 * kMs, start + 31 * kMs));
  // With no dedupe window every GPU's end stays.
  EXPECT_EQ(CollectiveEndsNs(space, /*dedupe_ns=*/0).size(), 5u);
  EXPECT_TRUE(CollectiveEndsNs(xspace::XSpace()).empty());
}

// Deduplicating takes any int64 ends: two ends 2^63 or more apart are two ends.
TEST(CollectiveEndsTest, DedupeKeepsEndsAsFarApartAsInt64Allows) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(DedupeCollectiveEnds({kMaxAbsTimeNs, -kMaxAbsTimeNs}),
            (std::vector<int64_t>{-kMaxAbsTimeNs, kMaxAbsTimeNs}));
  EXPECT_EQ(DedupeCollectiveEnds({kMax, kMin, 0}), (std::vector<int64_t>{kMin, 0, kMax}));
  EXPECT_EQ(DedupeCollectiveEnds({kMax, kMax - 5, kMin + 5, kMin}, 10),
            (std::vector<int64_t>{kMin, kMax - 5}));
}

TEST(CollectiveEndsTest, AbsoluteLineFilesReadTheSame) {
  // A file with absolute line timestamps and no Task Environment (foreign or older profctl).
  xspace::XSpace space;
  xspace::XPlaneBuilder b(space.add_planes(), 0, "/device:GPU:0");
  xspace::XLine* line = b.AddLine(21, "Stream #21", kT0);
  b.AddEvent(line, b.EventMetadataId("ncclKernel_AllGather_RING"), kT0 + 5 * kMs, kMs);
  EXPECT_THAT(CollectiveEndsNs(space), ::testing::ElementsAre(kT0 + 6 * kMs));
}

// A collective still running when the window ended was clipped there by the agent and marked cut:
// its recorded end is the window's (which differs between hosts by their clock error), not the
// collective's, so it is not an end to align on. The same collective complete counts.
TEST(CollectiveEndsTest, ACollectiveClippedAtTheWindowsEndIsNoEnd) {
  for (const bool cut : {false, true}) {
    xspace::XSpace space;
    xspace::XPlaneBuilder b(space.add_planes(), 0, "/device:GPU:0", kT0);
    xspace::XLine* line = b.AddLine(21, "Stream #21(NCCL)", kT0);
    const int64_t id = b.EventMetadataId("ncclDevKernel_AllReduce_Sum_bf16_RING_LL");
    b.AddEvent(line, id, kT0 + 5 * kMs, kMs);
    xspace::XEvent* last = b.AddEvent(line, id, kT0 + 9 * kMs, kMs);
    if (cut) b.AddStat(last, b.StatMetadataId(xspace::kStatStepCut), int64_t{1});
    xspace::SetProfileWindow(&space, kT0, kT0 + 10 * kMs);
    if (cut) {
      EXPECT_THAT(CollectiveEndsNs(space), ::testing::ElementsAre(kT0 + 6 * kMs));
    } else {
      EXPECT_THAT(CollectiveEndsNs(space), ::testing::ElementsAre(kT0 + 6 * kMs, kT0 + 10 * kMs));
    }
  }
}

TEST(CollectiveEndsTest, CollectiveNames) {
  for (const char* yes :
       {"ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "NCCLKERNEL_Broadcast", "all-reduce.3",
        "all-reduce-done.1", "AllGather", "reduce_scatter", "all-to-all.2", "ReduceScatter"}) {
    EXPECT_TRUE(IsCollectiveOpName(yes)) << yes;
  }
  for (const char* no : {"ncclDevKernel_SendRecv", "ncclKernel_Send", "all-reduce-start.5",
                         "all-gather-start", "MemcpyHToD", "sm90_xmma_gemm", "reduce", ""}) {
    EXPECT_FALSE(IsCollectiveOpName(no)) << no;
  }
}

}  // namespace
}  // namespace profctl::analysis

namespace profctl::analysis {
namespace {

// A clock that cannot be measured is placed by step numbers, however far off it is (whole seconds,
// many steps), to within the step-start jitter; a step-periodic collective match could not.
TEST(OffsetFromStepsTest, PlacesAnUnmeasuredClockByStepNumbers) {
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<int64_t> jitter(-200'000, 200'000);  // +-0.2 ms
  for (int64_t true_offset : {int64_t{0}, int64_t{7'654'321'000}, int64_t{-123'456'789}}) {
    std::vector<std::pair<int64_t, int64_t>> reference, host;
    for (int64_t step = 100; step < 140; ++step) {
      const int64_t start = 1'000'000'000'000 + step * 40'000'000;  // 40 ms steps
      reference.emplace_back(step, start + jitter(rng));
      if (step >= 110) host.emplace_back(step, start + true_offset + jitter(rng));
    }
    const std::optional<StepOffset> o = OffsetFromSteps(host, reference);
    ASSERT_TRUE(o.has_value());
    EXPECT_EQ(o->common_steps, 30);
    EXPECT_LE(std::abs(o->offset_ns - true_offset), 400'000);
    EXPECT_LE(std::abs(o->offset_ns - true_offset), o->uncertainty_ns);
    EXPECT_GE(o->uncertainty_ns, 1'000'000);
    EXPECT_LT(o->uncertainty_ns, 20'000'000);  // well under half a step: collectives can refine
  }
}

TEST(OffsetFromStepsTest, TooFewCommonStepsOrAbsurdStartsGiveNothing) {
  const std::vector<std::pair<int64_t, int64_t>> reference = {{1, 10}, {2, 20}, {3, 30}};
  EXPECT_FALSE(OffsetFromSteps({{1, 15}, {2, 25}}, reference).has_value());
  EXPECT_FALSE(OffsetFromSteps({{7, 15}, {8, 25}, {9, 35}}, reference).has_value());
  EXPECT_TRUE(OffsetFromSteps({{1, 15}, {2, 25}, {3, 35}}, reference).has_value());
  EXPECT_EQ(OffsetFromSteps({{1, 15}, {2, 25}, {3, 35}}, reference)->offset_ns, 5);
  const std::vector<std::pair<int64_t, int64_t>> far = {
      {1, std::numeric_limits<int64_t>::min()}, {2, 0}, {3, 0}};
  EXPECT_FALSE(
      OffsetFromSteps(far, {{1, std::numeric_limits<int64_t>::max()}, {2, 0}, {3, 0}}).has_value());
  // A repeated step number counts once, with its first start.
  EXPECT_EQ(OffsetFromSteps({{1, 15}, {1, 999}, {2, 25}, {3, 35}}, reference)->common_steps, 3);
}

}  // namespace
}  // namespace profctl::analysis

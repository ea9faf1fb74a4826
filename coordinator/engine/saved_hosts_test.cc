#include "coordinator/engine/saved_hosts.h"

#include <cstdint>
#include <vector>

#include "analysis/alignment.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "profctl/v1/session.pb.h"
#include "tests/test_time.h"

namespace profctl::coordinator {
namespace {

using ::profctl::test_time::kMs;
using ::profctl::test_time::kT0;
using ::testing::HasSubstr;

// A host the collectives could not place keeps its clock-sync offset, and its warning says why:
// none in its trace, or all of them out of range (a trace with absurd timestamps).
TEST(AlignSavedHostsTest, AHostWhoseEndsAreAllOutOfRangeIsToldSo) {
  std::vector<profctl::v1::HostResult> results(4);
  std::vector<AlignHost> hosts(4);
  for (size_t i = 0; i < hosts.size(); ++i) {
    auto* c = results[i].mutable_clock();
    c->set_rtt_offset_ns(0);
    c->set_offset_ns(0);
    c->set_uncertainty_ns(1 * kMs);
    c->set_method("rtt");
    hosts[i].r = &results[i];
  }
  for (int64_t k = 0; k < 20; ++k) {
    hosts[0].collective_ends.push_back(kT0 + k * 100 * kMs);
    hosts[1].collective_ends.push_back(kT0 + k * 100 * kMs + 5'000);
  }
  hosts[2].collective_ends = {analysis::kMaxAbsTimeNs + 1, analysis::kMaxAbsTimeNs + 2};
  // hosts[3]: no collectives at all.
  profctl::v1::SessionManifest manifest;
  AlignSavedHosts(hosts, profctl::v1::ALIGN_MODE_COLLECTIVES, kT0, 5 * kMs, manifest);
  EXPECT_EQ(results[0].clock().method(), "collectives");
  EXPECT_EQ(results[1].clock().method(), "collectives");
  EXPECT_EQ(results[2].clock().method(), "rtt");
  EXPECT_THAT(results[2].clock().warning(),
              HasSubstr("clock: its 2 collective ends are out of range"));
  EXPECT_THAT(results[2].clock().warning(), HasSubstr("so it keeps its clock-sync (rtt) offset"));
  EXPECT_THAT(results[3].clock().warning(), HasSubstr("no collectives in its trace to align on"));
}

}  // namespace
}  // namespace profctl::coordinator

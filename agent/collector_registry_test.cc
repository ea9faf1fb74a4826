#include "agent/collector_registry.h"

#include <memory>

#include "agent/collectors/collector_names.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/fake_clock.h"

namespace profctl::agent {
namespace {

using ::profctl::testkit::FakeClock;
using ::testing::HasSubstr;

TEST(CollectorRegistryTest, MakesEveryCollectorByItsName) {
  FakeClock clock;
  EndpointPlan plan;
  plan.name = "worker-0";
  for (const absl::string_view name : {kSyntheticCollector, kTslCollector}) {
    absl::StatusOr<std::unique_ptr<Collector>> c = MakeCollector(name, plan, &clock, {});
    ASSERT_TRUE(c.ok()) << name << ": " << c.status();
    EXPECT_EQ((*c)->name(), name);
  }
}

TEST(CollectorRegistryTest, AnUnknownNameIsRefusedNamingTheFlag) {
  FakeClock clock;
  const absl::StatusOr<std::unique_ptr<Collector>> c =
      MakeCollector("nvtx", EndpointPlan(), &clock, {});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("--collectors: no factory for 'nvtx'"));
}

}  // namespace
}  // namespace profctl::agent

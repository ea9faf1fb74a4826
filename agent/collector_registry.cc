#include "agent/collector_registry.h"

#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/collectors/collector_names.h"
#include "agent/collectors/cupti/cupti_collector.h"
#include "agent/collectors/synthetic/synthetic_collector.h"

namespace profctl::agent {
namespace {

struct CollectorFactory {
  absl::string_view name;
  std::function<std::unique_ptr<Collector>(const EndpointPlan& plan, const Clock* clock,
                                           const CollectorEnv& env)>
      make;
};

const std::vector<CollectorFactory>& CollectorFactories() {
  static const auto* const kFactories = new std::vector<CollectorFactory>{
      {kSyntheticCollector,
       [](const EndpointPlan& plan, const Clock* /*clock*/,
          const CollectorEnv& /*env*/) -> std::unique_ptr<Collector> {
         return std::make_unique<SyntheticCollector>(plan.synthetic, plan.synthetic_memo);
       }},
      {kTslCollector,
       [](const EndpointPlan& plan, const Clock* clock,
          const CollectorEnv& /*env*/) -> std::unique_ptr<Collector> {
         return std::make_unique<TslCollector>(plan.tsl, clock);
       }},
      {kCuptiCollector,
       [](const EndpointPlan& plan, const Clock* clock,
          const CollectorEnv& env) -> std::unique_ptr<Collector> {
         return std::make_unique<cupti::CuptiCollector>(
             env.inject_server,
             cupti::CuptiCollectorOptions{.hostname = plan.name.empty() ? env.hostname : plan.name,
                                          .clock_skew_ns = plan.clock_skew_ns,
                                          .recorder_launches = plan.recorder_launches},
             clock);
       }},
  };
  return *kFactories;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Collector>> MakeCollector(absl::string_view name,
                                                         const EndpointPlan& plan,
                                                         const Clock* clock,
                                                         const CollectorEnv& env) {
  for (const CollectorFactory& f : CollectorFactories()) {
    if (f.name == name) return f.make(plan, clock, env);
  }
  return absl::InvalidArgumentError(absl::StrCat("--collectors: no factory for '", name, "'"));
}

}  // namespace profctl::agent

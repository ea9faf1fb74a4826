// The collector registry: how each collector of kCollectorNames (collectors/collector_names.h)
// is made for one endpoint of the agent. The one place that knows every collector's
// constructor; the server (agent/service/agent_server.h) asks it by name.
#ifndef PROFCTL_AGENT_COLLECTOR_REGISTRY_H_
#define PROFCTL_AGENT_COLLECTOR_REGISTRY_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "agent/collectors/collector.h"
#include "agent/collectors/cupti/inject_server.h"
#include "agent/collectors/tsl/tsl_collector.h"
#include "common/clock.h"
#include "synthetic/synthetic_job.h"

namespace profctl::agent {

// What endpoint i of the process is.
struct EndpointPlan {
  std::string name;  // may be empty: a single endpoint without --name
  int64_t clock_skew_ns = 0;
  synthetic::SyntheticJobConfig synthetic;  // with rank/world/clock_skew_ns of this endpoint
  // One for every endpoint of the process: their ranks are one job (synthetic::SyntheticStepMemo).
  std::shared_ptr<synthetic::SyntheticStepMemo> synthetic_memo;
  TslCollectorOptions tsl;        // --tsl-local servers, with clock_skew_ns of this endpoint
  bool recorder_launches = true;  // --flight-recorder-launches (the cupti collector's)
};

// What a collector needs beyond its endpoint's plan.
struct CollectorEnv {
  std::string hostname;  // the machine's: the cupti collector's name without --name
  // The cupti collector's socket server; needed when the collectors include cupti.
  cupti::InjectServer* inject_server = nullptr;
};

// Makes collector `name` for the endpoint of `plan`, on `clock` (the endpoint's, skewed).
// INVALID_ARGUMENT naming --collectors for a name the registry does not know.
absl::StatusOr<std::unique_ptr<Collector>> MakeCollector(absl::string_view name,
                                                         const EndpointPlan& plan,
                                                         const Clock* clock,
                                                         const CollectorEnv& env);

}  // namespace profctl::agent

#endif  // PROFCTL_AGENT_COLLECTOR_REGISTRY_H_

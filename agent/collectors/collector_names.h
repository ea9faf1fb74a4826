// The names of the collectors this build knows: the one place they are spelled. The agent's
// settings (--collectors and its "known collectors" error), the collector registry that makes
// them (agent/service/agent_server.cc) and each collector's name() all use these constants.
#ifndef PROFCTL_AGENT_COLLECTORS_COLLECTOR_NAMES_H_
#define PROFCTL_AGENT_COLLECTORS_COLLECTOR_NAMES_H_

#include "absl/strings/string_view.h"

namespace profctl::agent {

// The simulated training job (synthetic/): demos, tests, benchmarks.
inline constexpr absl::string_view kSyntheticCollector = "synthetic";
// Framework profiler servers on this host (JAX/TensorFlow), over tensorflow.ProfilerService.
inline constexpr absl::string_view kTslCollector = "tsl";
// CUDA processes running libprofctl_inject.so (CUPTI activity records).
inline constexpr absl::string_view kCuptiCollector = "cupti";

struct CollectorName {
  absl::string_view name;
  absl::string_view description;
};

// Every collector, in the order --help and the "known collectors" error list them.
inline constexpr CollectorName kCollectorNames[] = {
    {kSyntheticCollector, "the simulated training job"},
    {kTslCollector, "framework profiler servers on this host (--tsl-local)"},
    {kCuptiCollector, "CUDA processes running libprofctl_inject.so"},
};

}  // namespace profctl::agent

#endif  // PROFCTL_AGENT_COLLECTORS_COLLECTOR_NAMES_H_

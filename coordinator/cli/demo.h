// profctl demo: the embedded default. Starts local profctl-agent processes running one synthetic
// data-parallel job (one straggler rank, one input-stalled rank, skewed clocks), captures them
// like `profctl capture`, prints the summary and stops the agents.
#ifndef PROFCTL_COORDINATOR_CLI_DEMO_H_
#define PROFCTL_COORDINATOR_CLI_DEMO_H_

#include <cstdint>
#include <string>
#include <vector>

#include "coordinator/cli/cli_env.h"

namespace profctl::coordinator {

struct DemoJob {
  int64_t workers = 4;
  int64_t step_ms = 100;
  int64_t gpus = 2;
  int64_t seed = 7;
};

// The synthetic knobs and injected clock skew of rank `rank` of the demo job.
std::string DemoSyntheticKnobs(const DemoJob& job, int64_t rank);
int64_t DemoClockSkewMs(int64_t rank);

int DemoCommand(const std::vector<std::string>& args, const CliEnv& env);

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_CLI_DEMO_H_

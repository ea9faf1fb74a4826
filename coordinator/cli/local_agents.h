// profctl-agent child processes on this machine, for `profctl demo` and end-to-end tests.
// Each agent's stdout and stderr go to <scratch>/agent-<i>.log. Destruction stops them all.
// Each agent runs in its own process group, so a terminal's Ctrl-C reaches only this process,
// which cancels the capture in order and then stops the agents; and each gets SIGTERM if the
// thread that spawned it exits (PR_SET_PDEATHSIG), so no agent outlives a killed profctl.
#ifndef PROFCTL_COORDINATOR_CLI_LOCAL_AGENTS_H_
#define PROFCTL_COORDINATOR_CLI_LOCAL_AGENTS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"

namespace profctl::coordinator {

// The ports an agent wrote to its --port-file (common/port_file.h), in endpoint order (one unless
// it serves --endpoints=N); NOT_FOUND while it has not (yet) written the file. The agent writes
// it atomically, so a file is never seen half-written.
absl::StatusOr<std::vector<int>> ReadPortFileAll(const std::string& path);
// The first port of the file (the only one for a single-endpoint agent).
absl::StatusOr<int> ReadPortFile(const std::string& path);

class LocalAgents {
 public:
  explicit LocalAgents(std::string scratch_dir) : scratch_(std::move(scratch_dir)) {}
  ~LocalAgents() { StopAll(); }
  LocalAgents(const LocalAgents&) = delete;
  LocalAgents& operator=(const LocalAgents&) = delete;

  // Starts `binary args...`; agent i is the i-th call.
  absl::Status Spawn(const std::string& binary, const std::vector<std::string>& args);
  // Waits (polling every 20 ms on `clock`, up to 20 s) for agent i to write its --port-file;
  // fails early, naming its log, if the agent exits, and with CANCELLED once `stop` is stopped.
  absl::StatusOr<int> WaitForPort(size_t i, const std::string& port_file, const Clock& clock,
                                  const StopSignal* stop = nullptr);
  // The same for an agent started with --endpoints: all its ports, in endpoint order.
  absl::StatusOr<std::vector<int>> WaitForPorts(size_t i, const std::string& port_file,
                                                const Clock& clock,
                                                const StopSignal* stop = nullptr);
  // SIGTERM to every agent still running, then reaps them.
  void StopAll();
  const std::string& log(size_t i) const { return logs_[i]; }
  // Agent i's process id (tests: to kill, freeze or restart one).
  pid_t pid(size_t i) const { return pids_[i]; }

 private:
  std::string scratch_;
  std::vector<pid_t> pids_;
  std::vector<std::string> logs_;
};

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_CLI_LOCAL_AGENTS_H_

// The AgentClient seam: how the coordinator talks to one agent. The fan-out engine only knows
// this interface; GrpcAgentClient is the real one, tests use fakes that fail, hang or lie.
#ifndef PROFCTL_COORDINATOR_AGENT_CLIENT_H_
#define PROFCTL_COORDINATOR_AGENT_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/worker.h"

namespace profctl::coordinator {

struct AgentInfo {
  std::string name;
  std::string hostname;
  std::string version;
  std::vector<std::string> collectors;
  int64_t max_duration_ms = 0;
  bool busy = false;
};

// One SyncClock answer: agent wall clock at receive and at send.
struct ClockReading {
  int64_t receive_ns = 0;
  int64_t send_ns = 0;
};

struct CaptureArgs {
  std::string session_id;
  int64_t start_at_ns = 0;  // agent's clock
  int64_t duration_ms = 0;
};

struct CaptureReply {
  std::string xspace_bytes;  // serialized tensorflow.profiler.XSpace, not yet validated
  int64_t start_ns = 0;      // agent's clock
  int64_t stop_ns = 0;
  bool cancelled = false;
  std::string name;
  std::string hostname;
};

// Calls may come from several threads, one call at a time per client, except that Cancel may be
// called while a Capture on the same client is in flight. Every call has a timeout;
// errors carry canonical codes (UNAVAILABLE and DEADLINE_EXCEEDED for transport trouble).
class AgentClient {
 public:
  virtual ~AgentClient() = default;
  virtual absl::StatusOr<AgentInfo> GetInfo(int64_t timeout_ms) = 0;
  virtual absl::StatusOr<ClockReading> SyncClock(int64_t timeout_ms) = 0;
  // Blocks until the whole trace has arrived (or the timeout). Checks the stream's framing:
  // header first, data adding up to the announced size, trailer with the chunk count.
  virtual absl::StatusOr<CaptureReply> Capture(const CaptureArgs& args, int64_t timeout_ms) = 0;
  virtual absl::Status Cancel(const std::string& session_id, int64_t timeout_ms) = 0;
};

class AgentClientFactory {
 public:
  virtual ~AgentClientFactory() = default;
  virtual std::unique_ptr<AgentClient> Connect(const WorkerAddress& worker) = 0;
};

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_AGENT_CLIENT_H_

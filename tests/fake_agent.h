// In-process fake agents for coordinator tests. A FakeAgent runs a real CaptureManager with a
// synthetic collector on an auto-advancing FakeClock (so captures finish at once) and can be told
// to misbehave: be unreachable, fail a step, lie about its clock, or send a corrupt trace.
#ifndef PROFCTL_TESTS_FAKE_AGENT_H_
#define PROFCTL_TESTS_FAKE_AGENT_H_

#include <atomic>
#include <map>
#include <memory>
#include <string>

#include "agent/capture_manager.h"
#include "agent/collectors/synthetic_collector.h"
#include "coordinator/agent_client.h"
#include "tests/fake_clock.h"

namespace profctl::testing {

struct FakeAgentBehavior {
  absl::Status get_info_error = absl::OkStatus();  // returned by GetInfo when not OK
  absl::Status sync_error = absl::OkStatus();      // returned by every SyncClock when not OK
  absl::Status capture_error = absl::OkStatus();   // returned by Capture when not OK
  bool corrupt_trace = false;                      // Capture returns bytes that are not an XSpace
  int64_t clock_offset_ns = 0;                     // the agent's clock = coordinator clock + this
  int64_t one_way_delay_ns = 0;  // each SyncClock leg takes this long (advances the clock)
  // Capture waits this long on the fake clock before answering; Cancel ends the wait early, and
  // the reply then holds the window up to that moment with cancelled=true.
  int64_t capture_wait_ns = 0;
  std::string name = "";
};

class FakeAgent {
 public:
  // `clock` is the coordinator's (shared) fake clock; the agent sees it shifted by the offset.
  FakeAgent(FakeClock* clock, FakeAgentBehavior behavior, agent::SyntheticJobConfig job = {});

  std::unique_ptr<coordinator::AgentClient> NewClient();
  const FakeAgentBehavior& behavior() const { return behavior_; }
  int captures() const { return captures_.load(); }

 private:
  class Client;
  FakeClock* clock_;
  FakeAgentBehavior behavior_;
  SkewedClock agent_clock_;
  agent::SyntheticCollector collector_;
  agent::CaptureManager manager_;
  std::atomic<int> captures_{0};
  StopSignal cancel_;  // one-way: after a Cancel, later waits end at once
};

// Hands out clients for registered FakeAgents by worker address; unknown addresses are
// unreachable (UNAVAILABLE). Counts Connect calls so tests can prove nothing was contacted.
class FakeAgentFactory final : public coordinator::AgentClientFactory {
 public:
  void Add(const std::string& address, FakeAgent* agent) { agents_[address] = agent; }
  std::unique_ptr<coordinator::AgentClient> Connect(
      const coordinator::WorkerAddress& worker) override;
  int connects() const { return connects_.load(); }

 private:
  std::map<std::string, FakeAgent*> agents_;
  std::atomic<int> connects_{0};
};

}  // namespace profctl::testing

#endif  // PROFCTL_TESTS_FAKE_AGENT_H_

// In-process fake agents for coordinator tests, driven by a FakeExecutor: every RPC is a posted
// task that answers after the simulated network's one-way delays, on the fake clock. A FakeAgent
// validates captures with a real CaptureManager, records with a real synthetic collector, and can
// be told to misbehave: be unreachable, hang, fail a step, lie about its clock, start late, send a
// corrupt trace. Thousands of them run in one test thread in milliseconds.
#ifndef PROFCTL_TESTS_FAKE_AGENT_H_
#define PROFCTL_TESTS_FAKE_AGENT_H_

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/capture_manager.h"
#include "agent/collectors/synthetic/synthetic_collector.h"
#include "agent/hang_detector.h"
#include "coordinator/clients/agent_client.h"
#include "tests/fake_clock.h"
#include "tests/fake_executor.h"

namespace profctl::testkit {

struct FakeAgentBehavior {
  absl::Status get_info_error = absl::OkStatus();  // returned by GetInfo when not OK
  std::string instance_id = "";                    // GetInfo's instance id (one agent, two names)
  absl::Status sync_error = absl::OkStatus();      // returned by every SyncClock when not OK
  absl::Status capture_error = absl::OkStatus();   // returned by Capture when not OK
  bool corrupt_trace = false;                      // Capture returns bytes that are not an XSpace
  // The whole trace arrives, then the stream ends with this instead of OK (what the transport
  // reports for bytes damaged in transit: a checksum mismatch is DATA_LOSS).
  absl::Status transit_error = absl::OkStatus();
  int64_t clock_offset_ns = 0;  // the agent's clock = coordinator clock + this
  // Network one-way delays, coordinator -> agent and back.
  int64_t up_delay_ns = 0;
  int64_t down_delay_ns = 0;
  // What starting each RPC costs the caller (encoding, the transport's work on a loaded
  // machine): the fake clock moves this much inside the call. The first RPC on this agent's
  // channel costs first_send_cost_ns instead (it also connects).
  int64_t send_cost_ns = 0;
  int64_t first_send_cost_ns = 0;
  // Each clock sample answers this much later than the one before (a link that slows down while
  // the coordinator prepares): sample k, from 1, k times this after its round trip.
  int64_t sync_delay_growth_ns = 0;
  // GetInfo answers this much later than the round trip (an agent slow to answer its first RPC:
  // starting up, loading), while every later RPC takes the round trip alone.
  int64_t get_info_delay_ns = 0;
  // The transport reports the connection up (AgentClient::Connected) one round trip after the
  // first RPC, unless GetInfo hangs or this is false (a process frozen or still starting, whose
  // HTTP/2 handshake never completes).
  bool connects = true;
  // What a TCP handshake with the agent's host takes (AgentClient::ProbeHandshake answers it
  // that much later); unset: the probe answers UNIMPLEMENTED (a peer that cannot be probed).
  std::optional<int64_t> handshake_ns = std::nullopt;
  // Never answers that RPC: the caller gets DEADLINE_EXCEEDED at its timeout.
  bool hang_get_info = false;
  bool hang_sync = false;
  bool hang_capture = false;
  // The agent begins recording this long after it could have (a slow or overloaded host).
  int64_t start_delay_ns = 0;
  // Another client (or the agent's shutdown) cancels the recording this long after its start;
  // 0: never. The header then says `cancelled`.
  int64_t cancelled_by_other_after_ns = 0;
  // The recording ends this much after its window (a host frozen mid-window).
  int64_t overrun_ns = 0;
  // Sends the `started` message (new agents do; old ones only report the start in the header).
  bool send_started = true;
  int64_t max_duration_ms = 60'000;
  std::string name = "";
  // One-shot faults, consumed in order: the next GetInfo rounds fail with these (an agent down
  // when the session starts); the next Captures are refused with these before recording (a busy
  // agent: ALREADY_EXISTS); the next transfers (Capture or Fetch) end with these after all their
  // bytes (a reset or a flipped bit: UNAVAILABLE, DATA_LOSS).
  std::deque<absl::Status> get_info_failures = {};
  // By session id: that session's reserving GetInfo arrives this much later than the up delay
  // (two coordinators behind different paths reach the agents in different orders).
  std::map<std::string, int64_t> reserve_delay_ns = {};
  std::deque<absl::Status> capture_failures = {};
  std::deque<absl::Status> transfer_failures = {};
  // The first Capture stream breaks (UNAVAILABLE) this long after recording starts; the agent
  // records on to the end of the window and keeps the trace for a Fetch. 0: never.
  int64_t break_stream_after_start_ns = 0;
  // ... because the agent restarted: it stops recording and keeps nothing.
  bool restart_when_stream_breaks = false;
  // ... and is down this long after the break: Capture and Fetch fail UNAVAILABLE (connection
  // refused) until it is back.
  int64_t down_after_restart_ns = 0;
  // A Capture's answer sent slowly (a big trace on a slow link): the header, then one chunk of
  // `chunk_bytes` every `chunk_interval_ns`; 0: every chunk at once.
  int64_t chunk_interval_ns = 0;
  size_t chunk_bytes = 1 << 20;
  // Serves AgentService.Fetch (an agent that keeps its traces); false: an old agent.
  bool can_fetch = true;
  // GetStepSignal: never answers; fails with this; or answers this instead of its synthetic
  // job's steps (a peer that lies).
  bool hang_step_signal = false;
  absl::Status step_signal_error = absl::OkStatus();
  std::optional<profctl::v1::GetStepSignalResponse> step_signal_override = std::nullopt;
  // Answers GetStepSignalRequest.summary_only as profctl-agent does (each source's state from a
  // hang detector); false: an agent older than that field, which answers samples anyway.
  bool step_summaries = false;
  // What every trace lacks, in its header (CaptureHeader.shortfalls), as an agent says it.
  std::vector<profctl::v1::Shortfall> shortfalls = {};
};

class FakeAgent {
 public:
  // `clock` is the coordinator's (shared) fake clock; the agent sees it shifted by the offset.
  FakeAgent(FakeExecutor* executor, FakeClock* clock, FakeAgentBehavior behavior,
            synthetic::SyntheticJobConfig job = {});
  ~FakeAgent();

  std::unique_ptr<coordinator::AgentClient> NewClient();
  FakeAgentBehavior& behavior() { return behavior_; }
  int captures() const { return captures_; }
  int cancels() const { return cancels_; }
  int fetches() const { return fetches_; }
  // Handshake probes asked of this agent's host (AgentClient::ProbeHandshake).
  int handshake_probes() const { return handshake_probes_; }
  int reservations() const { return reservations_; }  // GetInfo calls that asked to reserve
  int step_signal_calls() const { return step_signal_calls_; }
  int syncs() const { return syncs_; }  // SyncClock calls
  // Clients of this agent not yet destroyed (a client is its channel: the connection).
  int live_clients() const { return live_clients_; }
  // Forgets every trace it kept (a restarted agent).
  void ForgetTraces() { kept_.clear(); }
  // Agent wall clock when the last capture started recording (0 if none).
  int64_t last_start_ns() const { return last_start_ns_; }
  // The agent's capture slot (e.g. to reserve it for a session no engine runs).
  agent::CaptureManager& manager() { return manager_; }

 private:
  class Client;
  struct Recording;
  void OnCaptureArrived(const coordinator::CaptureArgs& args, coordinator::CaptureStream* stream,
                        int64_t deadline_mono);
  void OnCancelArrived(const std::string& session_id);
  void OnFetchArrived(const coordinator::FetchArgs& args, coordinator::CaptureStream* stream,
                      int64_t deadline_mono);
  // Sends a finished trace down `stream` after the down delay (a one-shot transfer fault may
  // end it).
  void Send(coordinator::CaptureStream* stream, const coordinator::CaptureHeaderInfo& header,
            const std::shared_ptr<const std::string>& bytes);
  // Now: the header, the bytes in 1 MiB chunks, and OnDone (with a transit fault, if any). The
  // one place both a Capture's answer and a Fetch's are sent.
  void Deliver(coordinator::CaptureStream* stream, const coordinator::CaptureHeaderInfo& header,
               const std::string& bytes);
  void FinishRecording(const std::shared_ptr<Recording>& rec);
  // The slow answer (chunk_interval_ns): the chunk at `offset` now, the next one later.
  void SendChunk(const std::shared_ptr<Recording>& rec,
                 const std::shared_ptr<const std::string>& bytes, size_t offset);
  void EndRecording(const std::shared_ptr<Recording>& rec);
  FakeExecutor* ex_;
  FakeClock* clock_;
  FakeAgentBehavior behavior_;
  SkewedClock agent_clock_;
  agent::SyntheticCollector collector_;
  agent::CaptureManager manager_;
  agent::HangDetector hang_{10.0};  // profctl-agent's default --hang-factor
  int captures_ = 0;
  int cancels_ = 0;
  int fetches_ = 0;
  int handshake_probes_ = 0;
  int reservations_ = 0;
  int step_signal_calls_ = 0;
  int syncs_ = 0;
  std::atomic<int> live_clients_ = 0;  // clients may be destroyed on a pool thread
  struct Kept {
    coordinator::CaptureHeaderInfo header;
    std::shared_ptr<const std::string> bytes;
  };
  std::map<std::string, Kept> kept_;  // finished traces by session id (AgentService.Fetch)
  int64_t last_start_ns_ = 0;
  std::set<std::string> cancelled_ids_;
  std::shared_ptr<Recording> recording_;  // the capture in progress
  int64_t down_until_mono_ = 0;           // restarting (down_after_restart_ns) until then
};

// Hands out clients for registered FakeAgents by worker address; unknown addresses are
// unreachable (UNAVAILABLE, answered on the executor). Counts Connect calls so tests can prove
// nothing was contacted.
class FakeAgentFactory final : public coordinator::AgentClientFactory {
 public:
  explicit FakeAgentFactory(FakeExecutor* executor) : ex_(executor) {}
  void Add(const std::string& address, FakeAgent* agent) { agents_[address] = agent; }
  std::unique_ptr<coordinator::AgentClient> Connect(
      const coordinator::WorkerAddress& worker) override;
  int connects() const { return connects_.load(); }

 private:
  FakeExecutor* ex_;
  std::map<std::string, FakeAgent*> agents_;
  std::atomic<int> connects_{0};
};

}  // namespace profctl::testkit

#endif  // PROFCTL_TESTS_FAKE_AGENT_H_

// The AgentClient seam: how the coordinator talks to one agent, asynchronously. The engine only
// knows this interface; GrpcAgentClient (gRPC callback API) is the real one, tests use fakes
// that fail, hang, lie or answer slowly.
//
// Threading contract:
//   - Every call returns at once; its outcome arrives later through a callback. Callbacks run on
//     a transport thread (or, for fakes, on the test's executor), never inline inside the call
//     that started the RPC, and never block: they copy what they need and post to the caller's
//     executor.
//   - Each call takes a timeout; transport trouble is UNAVAILABLE or DEADLINE_EXCEEDED, other
//     errors keep the agent's canonical code with a message that names the RPC.
//   - Several calls may be in flight on one client at once (SyncClock samples, Cancel during
//     Capture). The client must outlive every call in flight: it waits in its destructor.
#ifndef PROFCTL_COORDINATOR_CLIENTS_AGENT_CLIENT_H_
#define PROFCTL_COORDINATOR_CLIENTS_AGENT_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "common/reservation.h"
#include "coordinator/clients/worker.h"
#include "profctl/v1/agent.pb.h"
#include "xspace/tsl_profile.h"

namespace profctl::coordinator {

struct AgentInfo {
  std::string name;
  std::string hostname;
  std::string version;
  std::vector<std::string> collectors;
  int64_t max_duration_ms = 0;
  bool busy = false;
  // Random per agent endpoint and process start ("" when the agent cannot say): two workers with
  // one instance id are one agent listed twice under different addresses.
  std::string instance_id = {};
};

// One SyncClock round trip. The agent's wall clock at receive and at send, and the caller's wall
// clock when the request left and the reply arrived, stamped by the transport as close to the
// wire as it can (so executor queueing does not inflate the round trip).
struct ClockReading {
  int64_t receive_ns = 0;  // agent clock
  int64_t send_ns = 0;     // agent clock
  int64_t local_send_ns = 0;
  int64_t local_receive_ns = 0;
};

// What a GetStepSignal asks for (GetStepSignalRequest).
struct StepSignalQuery {
  int64_t since_ns = 0;      // agent clock; 0: the agent's default window (10 minutes)
  uint32_t max_samples = 0;  // the latest this many; 0: the agent's default (1024)
  // Each source's state instead of its samples (GetStepSignalRequest.summary_only); an older
  // agent answers samples anyway.
  bool summary_only = false;
};

struct CaptureArgs {
  std::string session_id;
  int64_t start_at_ns = 0;  // agent's clock
  int64_t duration_ms = 0;
  // For peers that can only save a trace on their own disk (TSL servers that ignore
  // emit_xspace): the absolute folder that holds the session folder (`<logdir>/plugins/profile`),
  // so on a shared filesystem their file lands where profctl saves it. "" when not local.
  std::string repository_root = {};
  // The session's secret (CaptureRequest.session_key): Cancel and Fetch present it again.
  std::string session_key = {};
  // A snapshot of the past (CaptureRequest.past_ms; 0: a recording). profctl-agent only.
  int64_t past_ms = 0;
  // The tracer levels asked of framework profiler servers (CaptureRequest.*_tracer_level; a
  // grpc:// worker's ProfileOptions); profctl-agents pass them to their `tsl` collector.
  tsl::TracerLevels tracer_levels = {};
};

// A short hold on the agent's capture slot for the session about to be captured
// (GetInfoRequest.reserve), so a capture gets the whole pod or none of it. Empty session_id: none.
struct Reservation {
  std::string session_id;
  std::string session_key;
  int64_t ttl_ms = 0;
  // Against other sessions' reservations (common/reservation.h).
  ReservationPriority priority = {};
};

// Which session to serve again (AgentService.Fetch).
struct FetchArgs {
  std::string session_id;
  std::string session_key;
};

// What the agent says about the recording, first when it starts and then after it stopped.
struct CaptureHeaderInfo {
  int64_t start_ns = 0;  // agent's clock: actual start of recording
  int64_t stop_ns = 0;
  uint64_t total_bytes = 0;  // the serialized XSpace the data chunks add up to
  bool cancelled = false;
  std::string name;
  std::string hostname;
  // With cancelled: who stopped it (UNSPECIFIED from agents that predate the field).
  profctl::v1::CancelReason cancel_reason = profctl::v1::CANCEL_REASON_UNSPECIFIED;
  // Events the agent dropped to stay within its per-capture caps.
  uint64_t dropped_events = 0;
  // What the agent says its trace lacks (CaptureHeader.shortfalls), bounded by the framer.
  std::vector<profctl::v1::Shortfall> shortfalls = {};
};

// Receives one Capture stream. Calls come from a transport thread, one at a time and in this
// order: OnStarted (at most once, as soon as the agent begins recording; agents that predate it
// never send it), OnHeader (once), OnData (zero or more, in order), then OnDone exactly once, last.
// The client checks the stream's framing before calling: OnData never exceeds the announced
// total, and OnDone is OK only when the header came, the data added up to total_bytes and the
// trailer's chunk count matched. OnData may block briefly (it is the place to write a chunk to
// disk); the next chunk is not read before it returns, so memory stays bounded per stream.
class CaptureStream {
 public:
  virtual ~CaptureStream() = default;
  virtual void OnStarted(int64_t agent_start_ns) = 0;
  virtual void OnHeader(const CaptureHeaderInfo& header) = 0;
  // Returns an error to abort the stream (e.g. the disk is full); OnDone then gets that error.
  virtual absl::Status OnData(std::string_view chunk) = 0;
  virtual void OnDone(absl::Status status) = 0;
};

class AgentClient {
 public:
  template <typename T>
  using Callback = absl::AnyInvocable<void(absl::StatusOr<T>) &&>;
  using DoneCallback = absl::AnyInvocable<void(absl::Status) &&>;

  // Waits for every call in flight to finish (their callbacks have run).
  virtual ~AgentClient() = default;
  // With a reservation, an agent busy with or reserved for another session answers
  // ALREADY_EXISTS; when another session's reservation refused it, the status carries that
  // reservation's priority (ReservationConflictOf). Peers that cannot reserve (TSL servers, old
  // agents) ignore it.
  virtual void GetInfo(const Reservation& reserve, int64_t timeout_ms,
                       Callback<AgentInfo> done) = 0;
  void GetInfo(int64_t timeout_ms, Callback<AgentInfo> done) {
    GetInfo(Reservation{}, timeout_ms, std::move(done));
  }
  virtual void SyncClock(int64_t timeout_ms, Callback<ClockReading> done) = 0;
  // `stream` must stay alive until its OnDone is called; the client never touches the stream
  // after calling OnDone, so OnDone may hand the stream's end to another thread that frees it
  // (it must then not touch `this` itself after handing it over).
  virtual void Capture(const CaptureArgs& args, int64_t timeout_ms, CaptureStream* stream) = 0;
  // Asks the agent to stop the session early (it returns what it recorded). Harmless when the
  // session is not running; an agent remembers recently cancelled ids, so a Cancel that overtakes
  // its Capture still stops it.
  virtual void Cancel(const std::string& session_id, const std::string& session_key,
                      int64_t timeout_ms, DoneCallback done) = 0;
  // Streams again a trace the agent kept (AgentService.Fetch), through `stream` exactly as
  // Capture does (no OnStarted); waits for the session if it is still recording. NOT_FOUND when
  // the agent holds no such trace. Only called when CanFetch(); the default reports UNIMPLEMENTED.
  virtual void Fetch(const FetchArgs& /*args*/, int64_t /*timeout_ms*/, CaptureStream* stream) {
    stream->OnDone(absl::UnimplementedError("Fetch: this peer cannot serve a trace again"));
  }
  // The agent's step signal (AgentService.GetStepSignal): steps that ended after
  // `query.since_ns` (agent clock; 0: its default window), at most the latest
  // `query.max_samples`, and its stalled sources. Peers without one (TSL profiler servers, agents
  // before 0.3) answer UNIMPLEMENTED, the default.
  virtual void GetStepSignal(const StepSignalQuery& /*query*/, int64_t /*timeout_ms*/,
                             Callback<profctl::v1::GetStepSignalResponse> done) {
    std::move(done)(absl::UnimplementedError("GetStepSignal: this peer keeps no step signal"));
  }
  // Whether the peer can serve a trace again (a profctl-agent; not a TSL profiler server).
  virtual bool CanFetch() const { return false; }
  // Ends the Capture or Fetch in flight on this client, if any, without asking the agent: its
  // OnDone gets CANCELLED. Thread-safe.
  virtual void AbortCapture() = 0;
  // False for peers whose clock cannot be measured by RPC (TSL profiler servers): the engine
  // then takes no SyncClock samples, marks the host's clock `unmeasured` and aligns it from its
  // collectives when it can (their SyncClock answers UNIMPLEMENTED).
  virtual bool MeasuresClock() const { return true; }
  // Whether the transport's connection to the peer is up now (gRPC: the channel is READY, i.e.
  // the peer's process answered the HTTP/2 handshake), without asking the peer anything. A peer
  // connected but silent is alive behind a slow link, not dead: the engine waits for its GetInfo.
  // Thread-safe; false when unknown.
  virtual bool Connected() const { return false; }
  // How long a TCP handshake with the peer's host takes, on a connection of its own that sends
  // nothing (coordinator/clients/handshake_probe.h): the peer's kernel answers it even when its
  // process is frozen, so a peer not Connected() after many such times is frozen, not slow.
  // At most once per client; `done` runs on any thread. The default (peers that cannot be
  // probed) answers UNIMPLEMENTED: the engine then waits for them as for a slow link.
  virtual void ProbeHandshake(int64_t /*timeout_ms*/, Callback<int64_t> done) {
    std::move(done)(absl::UnimplementedError("handshake probe: not for this peer"));
  }
};

class AgentClientFactory {
 public:
  virtual ~AgentClientFactory() = default;
  virtual std::unique_ptr<AgentClient> Connect(const WorkerAddress& worker) = 0;
};

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_CLIENTS_AGENT_CLIENT_H_

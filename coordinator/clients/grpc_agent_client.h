// AgentClient over gRPC (profctl.v1.AgentService), on gRPC's callback API.
//
// No thread per client or per call: every RPC is started with `stub->async()` and its outcome is
// delivered from gRPC's own callback threads, so one process drives thousands of clients (each
// with its own channel) from a handful of threads. Every call keeps its ClientContext, request
// and response in a heap object that lives until its completion callback has run.
//
// Contract beyond AgentClient's (coordinator/clients/agent_client.h):
//   - Callbacks (the `done` of unary calls, every CaptureStream method) run on a gRPC callback
//     thread, never inline inside the call that started the RPC. They must not block (OnData may
//     block briefly) and must not destroy the client (its destructor waits for them).
//   - Capture reads one chunk at a time: the next read starts only after CaptureStream::OnData
//     returned, so at most one chunk (<= 1 MiB by protocol, < 16 MiB accepted) is buffered per
//     stream. Framing is checked before each CaptureStream call; the first violation cancels
//     the RPC and is what OnDone gets:
//       started after the header, or twice             DATA_LOSS
//       a second header                                 DATA_LOSS
//       total_bytes over max_trace_bytes                RESOURCE_EXHAUSTED
//       data before the header or after the trailer     DATA_LOSS
//       data beyond the announced total_bytes           DATA_LOSS
//       a trailer out of order or with a wrong count    DATA_LOSS
//       a trailer CRC-32 the data does not match        DATA_LOSS ("checksum mismatch")
//       a chunk with no part set                        DATA_LOSS
//       OnData returned an error                        that error, unchanged
//     Without a violation, a stream the transport ended early reports the transport's status
//     (DEADLINE_EXCEEDED for a transfer cut by the deadline, UNAVAILABLE for a dead peer, the
//     agent's own code otherwise); a stream the agent ended with OK but incomplete (no header, no
//     trailer, fewer bytes than announced) is DATA_LOSS.
//   - AbortCapture cancels the Capture in flight (gRPC TryCancel); its OnDone gets CANCELLED.
//   - The destructor cancels every call still in flight (their callbacks get CANCELLED), then
//     waits until every callback has run. No call may be started once destruction has begun.
//   - Error messages start with the RPC's name ("GetInfo: ...", "Capture: ...").
#ifndef PROFCTL_COORDINATOR_CLIENTS_GRPC_AGENT_CLIENT_H_
#define PROFCTL_COORDINATOR_CLIENTS_GRPC_AGENT_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "coordinator/clients/agent_client.h"
#include "coordinator/clients/agent_credentials.h"

namespace profctl::coordinator {

struct GrpcAgentClientOptions {
  // A trace larger than this is refused (protects the coordinator from a peer that lies).
  uint64_t max_trace_bytes = uint64_t{2} << 30;
  // Stamps ClockReading::local_send_ns (right before a SyncClock call starts) and
  // local_receive_ns (first thing in its completion callback), on WallNs(). Not owned; must
  // outlive every client. nullptr: the host's real clock. Deadlines are always real time (gRPC's).
  const Clock* clock = nullptr;
  // Tests only: the :authority to send to `worker`; unset or "": worker.target() (gRPC's
  // default). A multi-endpoint agent (profctl-agent --endpoints=N) routes every call by the port
  // in its :authority, so a client that reaches endpoint i through a TcpProxy must name endpoint
  // i's address here, not the proxy's.
  std::function<std::string(const WorkerAddress& worker)> authority_for_testing = nullptr;
  // TLS and bearer token for profctl-agents (not grpc:// workers); null: plaintext, no token.
  std::shared_ptr<const AgentCredentials> credentials = nullptr;
  // Tests only: what ProbeHandshake answers for `worker` instead of a real TCP handshake's time
  // (unset: the real one). The test's TCP proxy delays data, not the kernel's handshake, so a
  // test of a slow link says here what that link's handshake would take.
  std::function<absl::StatusOr<int64_t>(const WorkerAddress& worker)> handshake_for_testing =
      nullptr;
};

// GetInfo's error for `target`: an UNIMPLEMENTED answer means something that speaks gRPC but
// not AgentService listens there (a coordinator daemon, a framework profiler server without
// grpc://), and the message says so instead of gRPC's bare "UNIMPLEMENTED". Other errors pass
// through.
absl::Status ExplainGetInfoError(absl::string_view target, absl::Status status);

class HandshakeProber;

class GrpcAgentClientFactory final : public AgentClientFactory {
 public:
  explicit GrpcAgentClientFactory(GrpcAgentClientOptions options = {});
  ~GrpcAgentClientFactory() override;
  // Creates a client with its own channel to worker.target(): a GrpcAgentClient for a
  // profctl-agent, a TslAgentClient (tsl_agent_client.h) for a grpc:// worker. Never blocks: the
  // channel connects on the first call, and a peer that cannot be reached shows up as that
  // call's UNAVAILABLE.
  std::unique_ptr<AgentClient> Connect(const WorkerAddress& worker) override;

 private:
  GrpcAgentClientOptions options_;
  // One thread for every client's handshake probe, started with the first client; shared with
  // the clients, so it stops with the last of them.
  absl::Mutex prober_mu_;
  std::shared_ptr<HandshakeProber> prober_ ABSL_GUARDED_BY(prober_mu_);
};

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_CLIENTS_GRPC_AGENT_CLIENT_H_

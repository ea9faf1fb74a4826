// AgentClient for grpc:// workers: TensorFlow/JAX/TSL profiler servers
// (`tf.profiler.experimental.server.start(port)`, `jax.profiler.start_server(port)`, or our agent's
// own tensorflow.ProfilerService), on gRPC's callback API. Wire facts: TSL_WIRE.md; what profctl
// does with them: docs/tensorflow-interop.md.
//
// How AgentClient maps onto tensorflow.ProfilerService:
//   GetInfo     a `Monitor` probe: OK or UNIMPLEMENTED (what open-source servers answer) proves
//               the server is there; version kTslAgentVersion, never `busy` (TSL cannot say).
//   SyncClock   not measurable by RPC: always UNIMPLEMENTED (after a Monitor round trip, to keep
//               the callback contract); MeasuresClock() is false, so the engine does not ask.
//   Capture     one unary `Profile` (MakeTslProfileRequest): version 1, start_timestamp_ns = the
//               start instant (the engine's, in the worker's clock as far as it is known), both
//               duration fields, one session id, host_name = the worker's file stem,
//               emit_xspace, repository_root = CaptureArgs::repository_root. The
//               answer (TraceFromProfileResponse) becomes OnStarted/OnHeader/OnData/OnDone, the
//               header's window from the XSpace's `Task Environment` when it has one.
//   Cancel      `Terminate(session_id)`.
// Error messages start with the RPC's name ("Profile: ...").
#ifndef PROFCTL_COORDINATOR_CLIENTS_TSL_AGENT_CLIENT_H_
#define PROFCTL_COORDINATOR_CLIENTS_TSL_AGENT_CLIENT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "coordinator/clients/agent_client.h"
#include "coordinator/clients/grpc_agent_client.h"
#include "tensorflow/profiler/profiler_service.pb.h"
#include "xspace/tsl_profile.h"

namespace profctl::coordinator {

// AgentInfo::version of a TSL server (GetInfo cannot ask it for one).
inline constexpr absl::string_view kTslAgentVersion = "tsl";

// The pure request/answer helpers live in xspace/tsl_profile.h (the agent's tsl collector uses
// them too); these names keep the coordinator's spelling.
using tsl::kTslDeviceTracerLevel;
using tsl::kTslHostTracerLevel;
using tsl::TraceFromProfileResponse;

// tsl::MakeTslProfileRequest for a session's capture of `worker`: host_name = its file stem.
tensorflow::ProfileRequest MakeTslProfileRequest(const CaptureArgs& args,
                                                 const WorkerAddress& worker);

std::unique_ptr<AgentClient> MakeTslAgentClient(const WorkerAddress& worker,
                                                const GrpcAgentClientOptions& options);

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_CLIENTS_TSL_AGENT_CLIENT_H_

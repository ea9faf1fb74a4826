// gRPC adapter for TensorFlow's profiler protocol: tensorflow.ProfilerService, served by the agent
// on the same port(s) as profctl.v1.AgentService, so stock TensorFlow/JAX/TensorBoard/XProf
// clients capture an agent as if it were a TensorFlow profiler server, with no shared filesystem.
// Decisions and their reasons: docs/tensorflow-interop.md.
//
// Profile runs one capture through the endpoint's CaptureManager (the same single slot as
// AgentService.Capture: a busy agent answers ALREADY_EXISTS, as TSL servers do). It uses the
// callback API: the unary reactor returns at once and finishes from the session's on_done on the
// collect executor, so no gRPC thread waits out a window. The answer holds the whole XSpace in one
// message, as the TSL protocol has it:
//   - emit_xspace set: in ProfileResponse.xspace only (no tool_data: the trace is not sent twice;
//     clients that set emit_xspace read field 8);
//   - else, when saving applies (below): written to <repository_root>/<session>/<host>.xplane.pb
//     on this machine, and the response carries no trace (what a TSL server does);
//   - else: one tool_data entry named "xplane.pb" holding the serialized XSpace, which stock
//     clients save as <logdir>/plugins/profile/<session>/<host_port>.xplane.pb.
// empty_trace is set only when the trace holds no event.
//
// Saving on the agent's disk: a TSL server writes wherever the request's repository_root says. A
// remote peer choosing a path this process writes to is a hole, so the agent saves only when it
// was started with --tsl-save-root=DIR (opt-in) and repository_root lies inside DIR (symlinks
// resolved). Any other repository_root is not an error: the trace comes back in tool_data.
//
// Terminate is AgentService.Cancel: it stops the session with that id (its Profile answers with
// what was recorded) and remembers the id (a Profile it overtook fails with ABORTED). Monitor is
// UNIMPLEMENTED.
#ifndef PROFCTL_AGENT_SERVICE_TSL_PROFILER_SERVICE_H_
#define PROFCTL_AGENT_SERVICE_TSL_PROFILER_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/capture_manager.h"
#include "agent/service/agent_service.h"
#include "tensorflow/profiler/profiler_service.grpc.pb.h"

namespace profctl::agent {

// The tool_data name (and file suffix) of an XSpace in the TSL protocol.
inline constexpr char kXPlaneToolName[] = "xplane.pb";

struct TslServiceOptions {
  // --tsl-save-root as CanonicalSaveRoot returns it, or empty: the agent never writes a trace for
  // a ProfilerService client.
  std::string save_root;
};

// What one tensorflow.ProfileRequest asks of an endpoint, checked.
struct TslProfilePlan {
  CaptureSpec spec;  // every collector of the endpoint
  bool emit_xspace = false;
  // The file to write the trace to (a save in the repository), or empty: answer with the trace.
  std::string save_path;
  // Why a non-empty repository_root is not used (for the log), when it is not.
  std::string save_skipped;
  // When the request names this host (override_hostname, host_name: stock clients send the
  // address they dialled), the answer's XSpace.hostnames is that name with ':' read as '_', i.e.
  // the stem of the file the client (or this agent) saves it as: XProf expects hostnames[0] in
  // the file's stem. Empty: the agent's own name stays.
  std::string answer_host;
};

// What PlanTslProfile needs to know about the endpoint.
struct TslPlanContext {
  int64_t now_wall_ns = 0;  // the endpoint's wall clock now
  int64_t max_duration_ms = 0;
  int64_t max_start_delay_ms = 0;
  std::string save_root;  // TslServiceOptions::save_root
  // The file stem of a save when the request names no host (the agent's name or hostname).
  std::string default_host_name;
  // The session id when the request names none.
  std::string generated_session_id;
};

// Reads a ProfileRequest the way TSL servers do:
//   - opts.version == 0 (old clients): opts are ignored; start at once, for duration_ms.
//   - version >= 1: start at opts.start_timestamp_ns on the endpoint's wall clock (0 or past: at
//     once; more than max_start_delay_ms ahead: INVALID_ARGUMENT), for opts.duration_ms, or
//     duration_ms when that is 0.
//   - Duration 0 or above max_duration_ms: INVALID_ARGUMENT.
//   - Session id: opts.session_id (version >= 1), else session_id, else generated_session_id;
//     INVALID_ARGUMENT unless it is a safe file stem ([A-Za-z0-9._-]{1,128}).
//   - Save path (see the top of this file): only with a save root, a non-empty repository_root
//     and no emit_xspace. A repository_root with a ".." component is INVALID_ARGUMENT; a relative
//     one or one outside the save root is not used (save_skipped says why). The file is
//     <repository_root>/<session id>/<host>.xplane.pb, host = opts.override_hostname (version
//     >= 1), else opts.advanced_configuration["override_hostname"], else host_name, else
//     default_host_name, with ':' read as '_' (as TSL names files); INVALID_ARGUMENT unless that
//     is a safe file stem.
// Errors name the request field and its value. Ignored: max_events, tools, tool_options and the
// tracer options (the endpoint runs the collectors it was started with).
absl::StatusOr<TslProfilePlan> PlanTslProfile(const tensorflow::ProfileRequest& request,
                                              const TslPlanContext& context);

// `dir` (--tsl-save-root) as the agent compares paths with it: absolute, symlinks resolved, no
// trailing '/'. INVALID_ARGUMENT naming the flag when it is relative or not an existing directory.
absl::StatusOr<std::string> CanonicalSaveRoot(const std::string& dir);

class TslProfilerServiceImpl final : public tensorflow::ProfilerService::CallbackService {
 public:
  // Every endpoint's manager and clock outlive the service (and the server's Shutdown).
  TslProfilerServiceImpl(std::vector<AgentEndpoint> endpoints, TslServiceOptions options);

  // See EndpointRouter::SetPorts.
  void SetPorts(const std::vector<int>& ports) { router_.SetPorts(ports); }

  grpc::ServerUnaryReactor* Profile(grpc::CallbackServerContext* ctx,
                                    const tensorflow::ProfileRequest* request,
                                    tensorflow::ProfileResponse* response) override;
  grpc::ServerUnaryReactor* Terminate(grpc::CallbackServerContext* ctx,
                                      const tensorflow::TerminateRequest* request,
                                      tensorflow::TerminateResponse* response) override;
  grpc::ServerUnaryReactor* Monitor(grpc::CallbackServerContext* ctx,
                                    const tensorflow::MonitorRequest* request,
                                    tensorflow::MonitorResponse* response) override;

 private:
  EndpointRouter router_;
  const TslServiceOptions options_;
  std::atomic<uint64_t> next_session_number_{1};
};

}  // namespace profctl::agent

#endif  // PROFCTL_AGENT_SERVICE_TSL_PROFILER_SERVICE_H_

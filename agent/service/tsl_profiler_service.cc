#include "agent/service/tsl_profiler_service.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <system_error>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/bounded_text.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "spdlog/spdlog.h"
#include "xspace/xspace.h"

namespace profctl::agent {
namespace {

namespace fs = std::filesystem;

using tensorflow::ProfileRequest;
using tensorflow::ProfileResponse;

// `path` without a trailing empty component ("/a/b/" -> "/a/b").
fs::path WithoutTrailingSlash(fs::path path) {
  if (!path.has_filename() && path.has_parent_path() && path != path.root_path()) {
    return path.parent_path();
  }
  return path;
}

// Whether `path` is `root` or lies under it, component by component (both canonical).
bool IsWithin(const fs::path& path, const fs::path& root) {
  auto p = path.begin();
  for (auto r = root.begin(); r != root.end(); ++r, ++p) {
    if (p == path.end() || *p != *r) return false;
  }
  return true;
}

// The file stem a save is named by: TSL's host naming, ':' read as '_'.
std::string SaveHost(const ProfileRequest& request, const TslPlanContext& context) {
  std::string host;
  if (request.opts().version() >= 1) {
    host = request.opts().override_hostname();
    if (host.empty()) {
      const auto& advanced = request.opts().advanced_configuration();
      if (auto it = advanced.find("override_hostname"); it != advanced.end()) {
        host = it->second.string_value();
      }
    }
  }
  if (host.empty()) host = request.host_name();
  if (host.empty()) host = context.default_host_name;
  return absl::StrReplaceAll(host, {{":", "_"}});
}

// Fills plan->save_path or plan->save_skipped; see PlanTslProfile.
absl::Status PlanSave(const ProfileRequest& request, const TslPlanContext& context,
                      TslProfilePlan* plan) {
  const std::string& root = request.repository_root();
  if (root.empty() || request.emit_xspace()) return absl::OkStatus();
  if (context.save_root.empty()) {
    plan->save_skipped = "this agent saves traces only when started with --tsl-save-root";
    return absl::OkStatus();
  }
  const fs::path path(root);
  for (const fs::path& part : path) {
    if (part == "..") {
      return absl::InvalidArgumentError(
          absl::StrCat("ProfileRequest.repository_root '", BoundedForLog(root), "' contains '..'"));
    }
  }
  if (!path.is_absolute()) {
    plan->save_skipped =
        absl::StrCat("repository_root '", BoundedForLog(root), "' is not an absolute path");
    return absl::OkStatus();
  }
  std::error_code ec;
  const fs::path resolved = WithoutTrailingSlash(fs::weakly_canonical(path, ec));
  if (ec) {
    plan->save_skipped = absl::StrCat("repository_root '", BoundedForLog(root),
                                      "' cannot be resolved: ", ec.message());
    return absl::OkStatus();
  }
  if (!IsWithin(resolved, fs::path(context.save_root))) {
    plan->save_skipped = absl::StrCat("repository_root '", BoundedForLog(root),
                                      "' is outside --tsl-save-root=", context.save_root);
    return absl::OkStatus();
  }
  const std::string host = SaveHost(request, context);
  if (!ValidateFileStem("host", host).ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ProfileRequest host name (host_name or override_hostname, ':' read as '_') '",
                     BoundedForLog(host), "' must be 1-128 characters of [A-Za-z0-9._-]"));
  }
  plan->save_path = JoinPath(JoinPath(resolved.string(), plan->spec.session_id),
                             absl::StrCat(host, ".", kXPlaneToolName));
  return absl::OkStatus();
}

// Answers one Profile call.
//
// Lifetime: created by Profile(), deleted in OnDone(), which gRPC calls only after Finish().
// Finish() is called exactly once: at once when Begin rejects the request, else from the
// session's on_done (the session's callbacks point at this reactor, so it must outlive them), on
// the collect executor, after the trace was put in the response (or saved).
class ProfileReactor final : public grpc::ServerUnaryReactor {
 public:
  ProfileReactor(const AgentEndpoint& endpoint, TslProfilePlan plan, ProfileResponse* response)
      : endpoint_(endpoint), plan_(std::move(plan)), response_(response) {
    const std::string id = plan_.spec.session_id;
    absl::StatusOr<std::unique_ptr<CaptureManager::Session>> session =
        endpoint.manager->Begin(plan_.spec);
    if (!session.ok()) {
      LogRequest(
          absl::StrCat("tsl profile rejected ", absl::StatusCodeToString(session.status().code())),
          absl::StrCat(LogPrefix(), "tsl profile '", BoundedForLog(id),
                       "' rejected: ", session.status().ToString()));
      Finish(ToGrpcStatus(session.status()));
      return;
    }
    spdlog::info(
        "{}tsl profile '{}' accepted: start_at={} duration={} ms, answer {}{}", LogPrefix(), id,
        plan_.spec.start_at_ns, plan_.spec.duration_ms,
        plan_.emit_xspace         ? "inline xspace"
        : plan_.save_path.empty() ? "tool_data xplane.pb"
                                  : absl::StrCat("saved to ", plan_.save_path),
        plan_.save_skipped.empty() ? "" : absl::StrCat(" (not saved: ", plan_.save_skipped, ")"));
    CaptureManager::Session* s = session->get();
    {
      absl::MutexLock lock(&mu_);
      session_ = std::move(*session);
    }
    s->Run({.on_started = nullptr,
            .on_done = [this](CaptureResult result) { OnCaptureDone(std::move(result)); }});
  }

  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    client_gone_ = true;
    if (session_ != nullptr) session_->Stop();
  }

  void OnDone() override { delete this; }

 private:
  std::string LogPrefix() const {
    return endpoint_.name.empty() ? std::string() : absl::StrCat(endpoint_.name, ": ");
  }

  // Writes the trace to plan_.save_path (atomically, creating its folder).
  absl::Status Save(const tensorflow::profiler::XSpace& space) const {
    PROFCTL_RETURN_IF_ERROR(MakeDirs(fs::path(plan_.save_path).parent_path().string()));
    return WriteFileAtomically(plan_.save_path, space.SerializeAsString());
  }

  // Collect executor: may do the heavy work (serializing, writing the file).
  void OnCaptureDone(CaptureResult result) {
    bool client_gone;
    {
      absl::MutexLock lock(&mu_);
      client_gone = client_gone_;
    }
    if (client_gone) {
      spdlog::info("{}tsl profile '{}' dropped: the client went away", LogPrefix(),
                   result.session_id);
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "capture cancelled by the client"));
      return;
    }
    const int64_t events = xspace::CountEvents(result.space);
    response_->set_empty_trace(events == 0);
    if (!plan_.answer_host.empty()) {
      result.space.clear_hostnames();
      result.space.add_hostnames(plan_.answer_host);
    }
    bool saved = false;
    if (!plan_.save_path.empty()) {
      if (absl::Status s = Save(result.space); s.ok()) {
        saved = true;
      } else {
        // The trace is not lost: it goes back in the response, which the client saves itself.
        spdlog::warn("{}tsl profile '{}': cannot save to {}: {}; answering with tool_data",
                     LogPrefix(), result.session_id, plan_.save_path, s.ToString());
        result.space.add_warnings(absl::StrCat("profctl-agent could not save this trace to ",
                                               plan_.save_path, ": ", s.ToString()));
      }
    }
    if (plan_.emit_xspace) {
      *response_->mutable_xspace() = std::move(result.space);
    } else if (!saved) {
      tensorflow::ProfileToolData* tool = response_->add_tool_data();
      tool->set_name(kXPlaneToolName);
      tool->set_data(result.space.SerializeAsString());
    }
    spdlog::info("{}tsl profile '{}' done: {} events{}{}", LogPrefix(), result.session_id, events,
                 result.cancelled ? " (stopped early)" : "",
                 saved ? absl::StrCat(", saved to ", plan_.save_path) : "");
    Finish(grpc::Status::OK);
  }

  const AgentEndpoint& endpoint_;
  const TslProfilePlan plan_;
  ProfileResponse* const response_;  // gRPC's; written only by OnCaptureDone, before Finish
  absl::Mutex mu_;
  // Kept until the reactor goes: Stop() on an ended session is harmless.
  std::unique_ptr<CaptureManager::Session> session_ ABSL_GUARDED_BY(mu_);
  bool client_gone_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

absl::StatusOr<TslProfilePlan> PlanTslProfile(const ProfileRequest& request,
                                              const TslPlanContext& context) {
  TslProfilePlan plan;
  const tensorflow::ProfileOptions& opts = request.opts();
  const bool new_semantics = opts.version() >= 1;
  if (const std::string host = SaveHost(request, TslPlanContext{}); !host.empty()) {
    plan.answer_host = host;
  }

  // Duration.
  uint64_t duration_ms = request.duration_ms();
  absl::string_view duration_field = "duration_ms";
  if (new_semantics && opts.duration_ms() != 0) {
    duration_ms = opts.duration_ms();
    duration_field = "opts.duration_ms";
  }
  if (duration_ms == 0) {
    return absl::InvalidArgumentError(
        new_semantics ? "ProfileRequest has no duration: set opts.duration_ms or duration_ms"
                      : "ProfileRequest.duration_ms is 0 (with opts.version 0 the server ignores "
                        "opts, so only duration_ms counts)");
  }
  if (duration_ms > static_cast<uint64_t>(context.max_duration_ms)) {
    return absl::InvalidArgumentError(absl::StrCat("ProfileRequest.", duration_field, "=",
                                                   duration_ms, " is above this agent's limit of ",
                                                   context.max_duration_ms, " ms"));
  }
  plan.spec.duration_ms = static_cast<int64_t>(duration_ms);

  // Start.
  if (new_semantics && opts.start_timestamp_ns() != 0) {
    const uint64_t start = opts.start_timestamp_ns();
    const int64_t max_ahead_ns = context.max_start_delay_ms * kNanosPerMilli;
    if (start > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        static_cast<int64_t>(start) - context.now_wall_ns > max_ahead_ns) {
      const int64_t ahead_ms =
          start > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
              ? std::numeric_limits<int64_t>::max() / kNanosPerMilli
              : (static_cast<int64_t>(start) - context.now_wall_ns) / kNanosPerMilli;
      return absl::InvalidArgumentError(
          absl::StrCat("ProfileRequest.opts.start_timestamp_ns=", start, " is ", ahead_ms,
                       " ms ahead of this agent's clock; at most ", context.max_start_delay_ms,
                       " ms is allowed (are the clocks far apart?)"));
    }
    // A past instant means at once (as TSL servers do), with no lateness warning.
    if (static_cast<int64_t>(start) > context.now_wall_ns) {
      plan.spec.start_at_ns = static_cast<int64_t>(start);
    }
  }

  // Session id.
  absl::string_view id_field = "session_id";
  plan.spec.session_id = request.session_id();
  if (new_semantics && !opts.session_id().empty()) {
    plan.spec.session_id = opts.session_id();
    id_field = "opts.session_id";
  }
  if (plan.spec.session_id.empty()) plan.spec.session_id = context.generated_session_id;
  if (!ValidateFileStem("session id", plan.spec.session_id).ok()) {
    return absl::InvalidArgumentError(absl::StrCat("ProfileRequest.", id_field, " '",
                                                   BoundedForLog(plan.spec.session_id),
                                                   "' must be 1-128 characters of [A-Za-z0-9._-]"));
  }
  // Terminate reaches only sessions this service started (never a profctl capture).
  plan.spec.origin = SessionOrigin::kTslService;

  plan.emit_xspace = request.emit_xspace();
  PROFCTL_RETURN_IF_ERROR(PlanSave(request, context, &plan));
  return plan;
}

absl::StatusOr<std::string> CanonicalSaveRoot(const std::string& dir) {
  const fs::path path(dir);
  if (!path.is_absolute()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tsl-save-root=", dir, " must be an absolute path"));
  }
  std::error_code ec;
  const fs::path canonical = fs::canonical(path, ec);
  if (ec || !fs::is_directory(canonical, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tsl-save-root=", dir, " is not an existing directory",
                     ec ? absl::StrCat(" (", ec.message(), ")") : ""));
  }
  return WithoutTrailingSlash(canonical).string();
}

TslProfilerServiceImpl::TslProfilerServiceImpl(std::vector<AgentEndpoint> endpoints,
                                               TslServiceOptions options)
    : router_(std::move(endpoints)), options_(std::move(options)) {}

grpc::ServerUnaryReactor* TslProfilerServiceImpl::Profile(grpc::CallbackServerContext* ctx,
                                                          const ProfileRequest* request,
                                                          ProfileResponse* response) {
  absl::StatusOr<const AgentEndpoint*> endpoint = router_.Route(*ctx);
  if (!endpoint.ok()) return FinishUnary(ctx, ToGrpcStatus(endpoint.status()));
  const AgentEndpoint& ep = **endpoint;
  const int64_t now = ep.clock->WallNs();
  const CaptureManagerOptions& limits = ep.manager->options();
  absl::StatusOr<TslProfilePlan> plan = PlanTslProfile(
      *request,
      {.now_wall_ns = now,
       .max_duration_ms = limits.max_duration_ms,
       .max_start_delay_ms = limits.max_start_delay_ms,
       .save_root = options_.save_root,
       .default_host_name = limits.host_name,
       .generated_session_id = absl::StrCat(
           "tsl_",
           absl::FormatTime("%Y_%m_%d_%H_%M_%S", absl::FromUnixNanos(now), absl::UTCTimeZone()),
           "_", next_session_number_.fetch_add(1))});
  if (!plan.ok()) {
    LogRequest(
        absl::StrCat("tsl profile rejected ", absl::StatusCodeToString(plan.status().code())),
        absl::StrCat(ep.name, ep.name.empty() ? "" : ": ",
                     "tsl profile rejected: ", plan.status().ToString()));
    return FinishUnary(ctx, ToGrpcStatus(plan.status()));
  }
  if (ep.store != nullptr) {
    if (absl::Status s = ep.store->CheckCapacity(); !s.ok()) {
      LogRequest(absl::StrCat("tsl profile rejected ", absl::StatusCodeToString(s.code())),
                 absl::StrCat(ep.name, ep.name.empty() ? "" : ": ",
                              "tsl profile rejected: ", s.ToString()));
      return FinishUnary(ctx, ToGrpcStatus(s));
    }
  }
  return new ProfileReactor(ep, std::move(*plan), response);
}

grpc::ServerUnaryReactor* TslProfilerServiceImpl::Terminate(
    grpc::CallbackServerContext* ctx, const tensorflow::TerminateRequest* request,
    tensorflow::TerminateResponse* /*response*/) {
  absl::StatusOr<const AgentEndpoint*> endpoint = router_.Route(*ctx);
  if (!endpoint.ok()) return FinishUnary(ctx, ToGrpcStatus(endpoint.status()));
  absl::Status s = absl::OkStatus();
  if (!ValidateFileStem("session id", request->session_id()).ok()) {
    s = absl::InvalidArgumentError(absl::StrCat("TerminateRequest.session_id '",
                                                BoundedForLog(request->session_id()),
                                                "' must be 1-128 characters of [A-Za-z0-9._-]"));
  }
  // Only sessions this service started: a profctl capture with the same id is not touched.
  if (s.ok()) {
    s = (*endpoint)->manager->Cancel(request->session_id(), /*session_key=*/"",
                                     SessionOrigin::kTslService);
  }
  LogRequest(
      absl::StrCat("tsl terminate ", absl::StatusCodeToString(s.code())),
      absl::StrCat((*endpoint)->name, (*endpoint)->name.empty() ? "" : ": ", "tsl terminate '",
                   BoundedForLog(request->session_id()), "': ", s.ToString()));
  return FinishUnary(ctx, ToGrpcStatus(s));
}

grpc::ServerUnaryReactor* TslProfilerServiceImpl::Monitor(
    grpc::CallbackServerContext* ctx, const tensorflow::MonitorRequest* /*request*/,
    tensorflow::MonitorResponse* /*response*/) {
  if (auto ep = router_.Route(*ctx); !ep.ok()) return FinishUnary(ctx, ToGrpcStatus(ep.status()));
  return FinishUnary(ctx, grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                                       "profctl-agent does not implement "
                                       "tensorflow.ProfilerService/Monitor (nor do open-source "
                                       "TensorFlow and JAX servers); use Profile"));
}

}  // namespace profctl::agent

#include "agent/collectors/tsl/tsl_collector.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <functional>
#include <memory>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "google/protobuf/arena.h"
#include "spdlog/spdlog.h"
#include "tensorflow/profiler/profiler_service.grpc.pb.h"
#include "xspace/tsl_profile.h"
#include "xspace/xspace.h"
#include "xspace/xspace_merge.h"

namespace profctl::agent {
namespace {

using tensorflow::profiler::XPlane;
using tensorflow::profiler::XSpace;

constexpr absl::string_view kGrpcScheme = "grpc://";
// Collect waits this much past a call's own gRPC deadline before it stops waiting for its
// callback (gRPC ends the call at its deadline; this only bounds a callback that never comes).
constexpr int64_t kCallbackBackstopMs = 5'000;

absl::Status BadAddress(absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("'", text, "' ", why));
}

// "localhost:9999" -> "localhost_9999", "[::1]:9999" -> "__1_9999": the host_name a server that
// can only save names its file with.
std::string FileStem(absl::string_view target) {
  std::string stem;
  for (const char c : target) {
    if (c == '[' || c == ']') continue;
    stem.push_back(c == ':' ? '_' : c);
  }
  return stem;
}

// Why a Profile call failed, in words a person acts on.
std::string DescribeFailure(const grpc::Status& s, int64_t grace_ms) {
  const std::string detail =
      absl::StrCat(absl::StatusCodeToString(static_cast<absl::StatusCode>(s.error_code())), ": ",
                   s.error_message());
  switch (s.error_code()) {
    case grpc::StatusCode::ALREADY_EXISTS:
      return absl::StrCat(
          "busy: another profiling session is running in that process, its planes are missing "
          "from this capture (",
          detail, ")");
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return absl::StrCat("slow: no answer by the end of the window + ", grace_ms,
                          " ms grace, its planes are missing from this capture (", detail, ")");
    case grpc::StatusCode::UNAVAILABLE:
      return absl::StrCat(
          "unreachable: is the framework's profiler server running there "
          "(jax.profiler.start_server(port), tf.profiler.experimental.server.start(port))? (",
          detail, ")");
    default:
      return absl::StrCat("Profile failed (", detail, ")");
  }
}

}  // namespace

absl::StatusOr<std::string> ParseTslAddress(absl::string_view text) {
  absl::string_view spec = absl::StripAsciiWhitespace(text);
  if (spec.empty()) return BadAddress(text, "is empty; want host:port or [ipv6]:port");
  if (absl::StrContains(spec, "://") && !absl::ConsumePrefix(&spec, kGrpcScheme)) {
    return BadAddress(text, "has an unknown scheme; want host:port, [ipv6]:port or grpc://...");
  }
  std::string host;
  absl::string_view port_text;
  if (absl::StartsWith(spec, "[")) {
    const size_t close = spec.find(']');
    if (close == absl::string_view::npos) return BadAddress(text, "has no ']' after the IPv6 host");
    host = std::string(spec.substr(1, close - 1));
    absl::string_view rest = spec.substr(close + 1);
    if (!absl::ConsumePrefix(&rest, ":")) {
      return BadAddress(text, "has no port; want [ipv6]:port, e.g. [::1]:9999");
    }
    port_text = rest;
    if (host.empty()) return BadAddress(text, "has an empty IPv6 host");
  } else {
    const size_t colon = spec.rfind(':');
    if (colon == absl::string_view::npos) {
      return BadAddress(text, "has no port; want host:port, e.g. localhost:9999");
    }
    host = std::string(spec.substr(0, colon));
    port_text = spec.substr(colon + 1);
    if (absl::StrContains(host, ':')) {
      return BadAddress(text,
                        "looks like an IPv6 address without brackets; write [ipv6]:port, "
                        "e.g. [::1]:9999");
    }
    if (host.empty()) return BadAddress(text, "has no host; want host:port, e.g. localhost:9999");
  }
  for (const char c : host) {
    if (absl::ascii_isspace(static_cast<unsigned char>(c)) || c == '/' || c == ',' || c == '[' ||
        c == ']' || c == '@') {
      return BadAddress(text, absl::StrCat("has a character '", std::string(1, c),
                                           "' that cannot be in a host name"));
    }
  }
  int port = 0;
  if (port_text.empty() || !std::all_of(port_text.begin(), port_text.end(), absl::ascii_isdigit) ||
      !absl::SimpleAtoi(port_text, &port) || port < 1 || port > 65535) {
    return BadAddress(text, absl::StrCat("has port '", port_text, "'; want a number in 1..65535"));
  }
  const bool ipv6 = absl::StartsWith(spec, "[");
  return absl::StrCat(ipv6 ? "[" : "", host, ipv6 ? "]" : "", ":", port);
}

absl::StatusOr<std::vector<std::string>> ParseTslAddressList(absl::string_view text) {
  std::vector<std::string> targets;
  if (absl::StripAsciiWhitespace(text).empty()) return targets;
  absl::flat_hash_set<std::string> seen;
  for (absl::string_view entry : absl::StrSplit(text, ',')) {
    if (absl::StripAsciiWhitespace(entry).empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", text, "' has an empty entry; want host:port,host:port,..."));
    }
    PROFCTL_ASSIGN_OR_RETURN(std::string target, ParseTslAddress(entry));
    if (!seen.insert(target).second) {
      return absl::InvalidArgumentError(absl::StrCat("'", target, "' is listed twice"));
    }
    targets.push_back(std::move(target));
  }
  return targets;
}

struct TslCollector::Server {
  std::string address;
  std::unique_ptr<tensorflow::ProfilerService::Stub> stub;
};

// One Profile in flight: what gRPC reads and writes until its callback, which sets `status` and
// then notifies `done` (after which only the collector touches it).
struct TslCollector::ProfileCall {
  std::string address;
  grpc::ClientContext ctx;
  tensorflow::ProfileRequest request;
  tensorflow::ProfileResponse response;
  std::chrono::system_clock::time_point deadline;
  grpc::Status status;
  absl::Notification done;
};

// The calls in flight (Profile and Terminate): each one's state is kept alive here until its
// callback has run, and released there (destroyed unless the collector holds it too) before the
// call counts as ended. A callback's std::function holds only raw pointers, so no gRPC state (a
// ClientContext holds its channel) is ever destroyed on gRPC's callback thread after the collector
// let go of its channels: the collector waits for every call to end before it does. Shared with
// the callbacks (it holds no gRPC state once they ended), so it may outlive the collector.
// Thread-safe.
class TslCollector::Tracker {
 public:
  // Registers a call about to start; `owner` keeps `ctx` alive.
  uint64_t Begin(std::shared_ptr<void> owner, grpc::ClientContext* ctx) {
    absl::MutexLock lock(&mu_);
    const uint64_t id = next_id_++;
    calls_.emplace(id, Entry{std::move(owner), ctx});
    return id;
  }

  // The last thing a call's callback does: the tracker may be destroyed once it returns.
  void End(uint64_t id) {
    std::shared_ptr<void> owner;
    {
      absl::MutexLock lock(&mu_);
      auto it = calls_.find(id);
      owner = std::move(it->second.owner);
      calls_.erase(it);
    }
    owner.reset();  // may destroy the call's ClientContext: before the call counts as ended
    absl::MutexLock lock(&mu_);
    ++ended_;
  }

  // Cancels every call in flight; their callbacks then report CANCELLED. Never blocks on them.
  void CancelAll() {
    std::vector<Entry> victims;
    {
      absl::MutexLock lock(&mu_);
      for (const auto& [id, entry] : calls_) victims.push_back(entry);
    }
    for (const Entry& e : victims) e.ctx->TryCancel();
  }

  // Blocks until every call that began has ended.
  void AwaitIdle() {
    absl::MutexLock lock(&mu_);
    auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return ended_ == next_id_; };
    mu_.Await(absl::Condition(&idle));
  }

 private:
  struct Entry {
    std::shared_ptr<void> owner;
    grpc::ClientContext* ctx = nullptr;
  };
  absl::Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t ended_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<uint64_t, Entry> calls_ ABSL_GUARDED_BY(mu_);
};

TslCollector::TslCollector(TslCollectorOptions options, const Clock* clock)
    : options_(std::move(options)), clock_(clock), tracker_(std::make_shared<Tracker>()) {
  grpc::ChannelArguments args;
  // The whole XSpace comes in one message (TSL's protocol), as TensorFlow's client allows.
  args.SetMaxReceiveMessageSize(INT_MAX);
  for (const std::string& address : options_.servers) {
    auto server = std::make_unique<Server>();
    server->address = address;
    server->stub = tensorflow::ProfilerService::NewStub(
        grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
    servers_.push_back(std::move(server));
  }
}

TslCollector::~TslCollector() {
  tracker_->CancelAll();
  tracker_->AwaitIdle();
  // Now the calls' states (ours in calls_) and then the channels go, on this thread.
}

absl::Status TslCollector::Prepare(const CaptureOptions& options) {
  // Calls left by a session that never collected (its Collect was skipped) are abandoned.
  for (const std::shared_ptr<ProfileCall>& call : calls_) call->ctx.TryCancel();
  calls_.clear();
  session_id_ = options.session_id;
  duration_ns_ = options.duration_ns;
  tracer_levels_ = {.host = options.host_tracer_level,
                    .device = options.device_tracer_level,
                    .python = options.python_tracer_level};
  start_ns_ = stop_ns_ = 0;
  running_ = false;

  const int64_t now = clock_->WallNs();
  const int64_t planned_start = options.start_wall_ns > 0 ? options.start_wall_ns : now;
  const int64_t until_end_ns = std::max<int64_t>(0, planned_start + duration_ns_ - now);
  // gRPC deadlines are real time by nature: the window's remaining length (on the agent's clock)
  // plus the grace, from now.
  const auto deadline = std::chrono::system_clock::now() + std::chrono::nanoseconds(until_end_ns) +
                        std::chrono::milliseconds(options_.grace_ms);
  const int64_t server_start =
      options.start_wall_ns > 0
          ? std::max<int64_t>(0, options.start_wall_ns - options_.clock_skew_ns)
          : 0;  // 0: at once
  const int64_t duration_ms = (duration_ns_ + kNanosPerMilli - 1) / kNanosPerMilli;
  for (const std::unique_ptr<Server>& server : servers_) {
    auto call = std::make_shared<ProfileCall>();
    call->address = server->address;
    call->request = tsl::MakeTslProfileRequest({.session_id = session_id_,
                                                .start_at_ns = server_start,
                                                .duration_ms = duration_ms,
                                                .host_name = FileStem(server->address),
                                                .tracer_levels = tracer_levels_});
    call->deadline = deadline;
    call->ctx.set_deadline(deadline);
    ProfileCall* raw = call.get();
    const uint64_t id = tracker_->Begin(call, &raw->ctx);
    calls_.push_back(std::move(call));
    server->stub->async()->Profile(
        &raw->ctx, &raw->request, &raw->response,
        std::function<void(grpc::Status)>([raw, id, tracker = tracker_](const grpc::Status& s) {
          raw->status = s;
          raw->done.Notify();
          tracker->End(id);  // last: `raw` may be gone once it returns
        }));
  }
  return absl::OkStatus();
}

absl::Status TslCollector::Start(int64_t wall_ns) {
  start_ns_ = wall_ns;
  running_ = true;
  return absl::OkStatus();
}

absl::Status TslCollector::Stop(int64_t wall_ns) {
  if (!running_) return absl::FailedPreconditionError("tsl collector: Stop before Start");
  running_ = false;
  stop_ns_ = wall_ns;
  // Stopped early (cancelled): the servers would otherwise record their whole window.
  if (wall_ns < start_ns_ + duration_ns_) TerminatePending();
  return absl::OkStatus();
}

void TslCollector::Abort() {
  TerminatePending();
  for (const std::shared_ptr<ProfileCall>& call : calls_) call->ctx.TryCancel();
  calls_.clear();
  running_ = false;
}

void TslCollector::TerminatePending() {
  struct TerminateCall {
    std::string address;
    grpc::ClientContext ctx;
    tensorflow::TerminateRequest request;
    tensorflow::TerminateResponse response;
  };
  for (size_t i = 0; i < calls_.size(); ++i) {
    if (calls_[i]->done.HasBeenNotified()) continue;
    auto call = std::make_shared<TerminateCall>();
    call->address = servers_[i]->address;
    call->request.set_session_id(session_id_);
    call->ctx.set_deadline(std::chrono::system_clock::now() +
                           std::chrono::milliseconds(options_.terminate_timeout_ms));
    TerminateCall* raw = call.get();
    const uint64_t id = tracker_->Begin(std::move(call), &raw->ctx);
    servers_[i]->stub->async()->Terminate(
        &raw->ctx, &raw->request, &raw->response,
        std::function<void(grpc::Status)>([raw, id, tracker = tracker_](const grpc::Status& s) {
          if (!s.ok()) {
            spdlog::warn("tsl {}: Terminate({}) failed: {}", raw->address,
                         raw->request.session_id(), s.error_message());
          }
          tracker->End(id);  // last: `raw` may be gone once it returns
        }));
  }
}

absl::Status TslCollector::Collect(XSpace* space) {
  if (running_) return absl::FailedPreconditionError("tsl collector: Collect before Stop");
  std::vector<profctl::v1::Shortfall> shortfalls;
  auto failed = [&](const ProfileCall& call, absl::string_view why) {
    space->add_errors(absl::StrCat("tsl ", call.address, ": ", why));
    shortfalls.push_back(
        MakeShortfall(profctl::v1::SHORTFALL_KIND_SOURCE_FAILED, 1,
                      absl::StrCat("framework profiler server ", call.address,
                                   " gave no planes for this window (its error is in the trace)")));
  };
  for (const std::shared_ptr<ProfileCall>& call : calls_) {
    const absl::Time backstop =
        absl::FromChrono(call->deadline) + absl::Milliseconds(kCallbackBackstopMs);
    if (!call->done.WaitForNotificationWithDeadline(backstop)) {
      call->ctx.TryCancel();
      failed(*call, absl::StrCat("slow: no answer, not even a deadline error, by the end of the "
                                 "window + ",
                                 options_.grace_ms, " ms grace; gave up on it"));
      continue;
    }
    if (absl::Status s = MergeAnswer(call.get(), space); !s.ok()) {
      failed(*call, s.message());
      spdlog::warn("session {}: tsl {}: {}", session_id_, call->address, std::string(s.message()));
    }
  }
  calls_.clear();
  {
    absl::MutexLock lock(&shortfalls_mu_);
    shortfalls_ = std::move(shortfalls);
  }
  xspace::SetProfileWindow(space, start_ns_, stop_ns_);
  return absl::OkStatus();
}

void TslCollector::TakeShortfalls(std::vector<profctl::v1::Shortfall>* out) {
  absl::MutexLock lock(&shortfalls_mu_);
  for (profctl::v1::Shortfall& s : shortfalls_) out->push_back(std::move(s));
  shortfalls_.clear();
}

absl::Status TslCollector::MergeAnswer(ProfileCall* call, XSpace* space) const {
  if (!call->status.ok()) {
    return absl::UnavailableError(DescribeFailure(call->status, options_.grace_ms));
  }
  // On the trace's arena (CaptureResult): moving their planes into it is then a pointer swap,
  // not a copy.
  XSpace* theirs = google::protobuf::Arena::CreateMessage<XSpace>(space->GetArena());
  const std::unique_ptr<XSpace> owned(space->GetArena() == nullptr ? theirs : nullptr);
  if (call->response.has_xspace()) {
    *theirs = std::move(*call->response.mutable_xspace());
  } else {
    absl::StatusOr<std::string> bytes =
        tsl::TraceFromProfileResponse(call->response, call->request);
    if (!bytes.ok()) return bytes.status();
    if (!theirs->ParseFromString(*bytes)) {
      return absl::DataLossError("the answer's xplane.pb is not a tensorflow.profiler.XSpace");
    }
  }
  call->response.Clear();

  // Re-base onto start_ns_ on the agent's clock (the rule shared with the coordinator).
  if (absl::Status s = tsl::RebaseTslSpace(theirs, start_ns_, options_.clock_skew_ns); !s.ok()) {
    return s;
  }
  auto* planes = theirs->mutable_planes();
  for (XPlane& plane : *planes) xspace::AddOrMergePlane(&plane, space);
  for (const std::string& e : theirs->errors()) {
    space->add_errors(absl::StrCat("tsl ", call->address, ": ", e));
  }
  for (const std::string& w : theirs->warnings()) {
    space->add_warnings(absl::StrCat("tsl ", call->address, ": ", w));
  }
  return absl::OkStatus();
}

}  // namespace profctl::agent

// The bookkeeping every gRPC callback-API client of the coordinator shares (GrpcAgentClient,
// TslAgentClient): a registry of the calls in flight, so that a client can cancel them and wait
// for their callbacks before it goes away, and the state of one unary call.
#ifndef PROFCTL_COORDINATOR_CLIENTS_GRPC_CALLS_H_
#define PROFCTL_COORDINATOR_CLIENTS_GRPC_CALLS_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cassert>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"

namespace profctl::coordinator::grpc_calls {

// Why this side cancelled a call, so that its callback can say so instead of gRPC's bare
// "Cancelled".
enum class LocalCancel { kNone, kAbortCapture, kClientDestroyed };

inline absl::Status FromGrpc(const grpc::Status& s, absl::string_view rpc) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat(rpc, ": ", s.error_message()));
}

// One call in flight: its context, shared by the call object (which owns it until the call's
// last callback) and the client's registry (so AbortCapture and the destructor can TryCancel it
// without holding the registry's lock, whatever moment the call finishes).
struct CallHandle {
  uint64_t id = 0;
  bool capture = false;
  grpc::ClientContext ctx;
  std::atomic<LocalCancel> local_cancel{LocalCancel::kNone};
};

// The status a call that ended with `s` reports.
inline absl::Status CallStatus(const grpc::Status& s, const CallHandle& call,
                               absl::string_view rpc) {
  if (s.error_code() == grpc::StatusCode::CANCELLED) {
    switch (call.local_cancel.load()) {
      case LocalCancel::kAbortCapture:
        return absl::CancelledError(absl::StrCat(rpc, ": aborted by the caller (AbortCapture)"));
      case LocalCancel::kClientDestroyed:
        return absl::CancelledError(
            absl::StrCat(rpc, ": the client was destroyed with the call in flight"));
      case LocalCancel::kNone:
        break;
    }
  }
  return FromGrpc(s, rpc);
}

// The calls in flight on one client. Thread-safe.
class CallRegistry {
 public:
  // Registers a new call whose context's deadline is `timeout_ms` from now. gRPC deadlines are
  // real time by nature; this is the one place the client reads the real clock for them.
  std::shared_ptr<CallHandle> Begin(bool capture, int64_t timeout_ms) {
    auto call = std::make_shared<CallHandle>();
    call->capture = capture;
    call->ctx.set_deadline(std::chrono::system_clock::now() +
                           std::chrono::milliseconds(timeout_ms));
    absl::MutexLock lock(&mu_);
    call->id = next_id_++;
    calls_.emplace(call->id, call);
    return call;
  }

  // Forgets call `id`. The last thing a call does, after its callbacks have run: the client
  // (and this registry) may be destroyed as soon as the lock is released.
  void End(uint64_t id) {
    absl::MutexLock lock(&mu_);
    auto it = calls_.find(id);
    assert(it != calls_.end());  // each call ends once
    // Destroys the context here (unless a canceller holds it for a moment), before the
    // destructor may proceed, so the channel it references goes away with the client.
    calls_.erase(it);
  }

  // Cancels the calls in flight (only Capture calls when `captures_only`); their callbacks then
  // report CANCELLED with `why`. Never blocks on the calls.
  void CancelAll(bool captures_only, LocalCancel why) {
    std::vector<std::shared_ptr<CallHandle>> victims;
    {
      absl::MutexLock lock(&mu_);
      for (const auto& [id, call] : calls_) {
        if (!captures_only || call->capture) victims.push_back(call);
      }
    }
    // Outside the lock: TryCancel makes gRPC schedule the call's callbacks, which end in End().
    for (const std::shared_ptr<CallHandle>& call : victims) {
      LocalCancel expected = LocalCancel::kNone;
      call->local_cancel.compare_exchange_strong(expected, why);
      call->ctx.TryCancel();
    }
  }

  // Blocks until no call is in flight.
  void AwaitIdle() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](absl::flat_hash_map<uint64_t, std::shared_ptr<CallHandle>>* calls) {
          return calls->empty();
        },
        &calls_));
  }

 private:
  absl::Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<uint64_t, std::shared_ptr<CallHandle>> calls_ ABSL_GUARDED_BY(mu_);
};

// One unary RPC in flight: everything gRPC reads or writes until the completion callback.
template <typename Request, typename Response>
struct UnaryCall {
  using Finish = absl::AnyInvocable<void(const grpc::Status&, UnaryCall&) &&>;
  std::shared_ptr<CallHandle> call;
  Request request;
  Response response;
  int64_t local_send_ns = 0;     // clock's wall time right before the call started
  int64_t local_receive_ns = 0;  // ... and first thing in the completion callback
  Finish finish;                 // runs the caller's callback
};

// Starts one unary call on `registry`: `start(ctx, request, response, callback)` issues it on a
// stub; `finish` runs in the completion callback (with the response and the local send/receive
// stamps from `clock`) and calls the caller's callback; the call is then freed and ended in
// the registry, last, so the client may go away once its own callbacks have run.
// A `capture` call is one AbortCapture cancels.
template <typename Call, typename Start>
void StartUnary(CallRegistry* registry, const Clock* clock, int64_t timeout_ms,
                decltype(Call::request) request, Start start, typename Call::Finish finish,
                bool capture = false) {
  auto* call = new Call{
      registry->Begin(capture, timeout_ms), std::move(request), {}, 0, 0, std::move(finish)};
  call->local_send_ns = clock->WallNs();
  // std::function needs a copyable callable: it holds only pointers; the call owns the rest.
  start(&call->call->ctx, &call->request, &call->response,
        std::function<void(grpc::Status)>([registry, clock, call](const grpc::Status& s) {
          call->local_receive_ns = clock->WallNs();
          std::move(call->finish)(s, *call);
          const uint64_t id = call->call->id;
          delete call;
          registry->End(id);  // last: the client may be gone once it returns
        }));
}

}  // namespace profctl::coordinator::grpc_calls

#endif  // PROFCTL_COORDINATOR_CLIENTS_GRPC_CALLS_H_

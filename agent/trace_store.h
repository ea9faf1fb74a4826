// The traces an agent keeps after their Capture, for AgentService.Fetch, and the ledger of the
// trace memory it holds (profctl-agent --retain-ms, --retain-mb, --max-held-mb).
//
// A keyed session (CaptureSpec::session_key non-empty) is Expect()ed when it begins and
// Complete()d with its serialized trace when it ends; Fetch(scope, id, key) answers at once when
// the trace is there, waits (a callback, no blocked thread) while it is still being recorded, and
// is NOT_FOUND otherwise: never recorded, keyless, expired, evicted or another key, one answer
// for all so that ids cannot be probed. A trace's bytes are one immutable shared buffer: the
// Capture stream that sends them, the retained copy and every Fetch stream share it, never copy.
//
// Memory: the store counts every distinct buffer that is retained or held by a stream (Hold)
// once. Retained traces go when older than retain_ms (monotonic time of their Complete), oldest
// first when the retained ones add up to more than retain_bytes, and oldest first when everything
// held is over max_held_bytes. CheckCapacity (before a new capture) evicts retained traces first
// and answers RESOURCE_EXHAUSTED when streams alone still hold more than max_held_bytes.
//
// Threading: every method is thread-safe. Fetch callbacks run outside the store's lock, either
// inline in Fetch or on the thread that calls Complete. Holds and pending tickets may outlive the
// store (they share its state).
#ifndef PROFCTL_AGENT_TRACE_STORE_H_
#define PROFCTL_AGENT_TRACE_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "agent/capture_manager.h"
#include "common/clock.h"
#include "common/executor.h"

namespace profctl::agent {

// One finished session's trace: what a Capture or Fetch stream sends. Immutable once built.
struct StoredTrace {
  std::string session_id;
  int64_t start_ns = 0;  // the recording window, agent wall clock
  int64_t stop_ns = 0;
  bool cancelled = false;
  CancelReason cancel_reason = CancelReason::kNone;
  uint64_t dropped_events = 0;
  // What the trace lacks of what was asked (CaptureHeader.shortfalls).
  std::vector<profctl::v1::Shortfall> shortfalls;
  std::shared_ptr<const std::string> data;  // the serialized XSpace; never null
  uint32_t crc32 = 0;                       // of *data (zlib's CRC-32)
};

struct TraceStoreOptions {
  int64_t retain_ms = 600'000;                  // 0: keep nothing
  int64_t retain_bytes = int64_t{256} << 20;    // 0: keep nothing
  int64_t max_held_bytes = int64_t{512} << 20;  // retained + held by streams
};

class TraceStore {
 public:
  struct Dependencies {
    const Clock* clock = nullptr;  // monotonic time for expiry
    // Optional: expiry is then also a timer task here (retained memory goes back on time even
    // when no request comes); without it, expired traces go at the next call. Its clock must be
    // `clock`.
    Executor* executor = nullptr;
  };

  struct State;
  struct Entry;
  // A keyed session being recorded; see Expect.
  using Ticket = std::shared_ptr<Entry>;
  using FetchCallback =
      absl::AnyInvocable<void(absl::StatusOr<std::shared_ptr<const StoredTrace>>) &&>;

  // Counts a buffer as held while alive (a stream still sending it). Movable.
  class Hold {
   public:
    Hold() = default;
    Hold(Hold&& other) noexcept = default;
    Hold& operator=(Hold&& other) noexcept;
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;
    ~Hold();

   private:
    friend class TraceStore;
    Hold(std::shared_ptr<State> state, std::shared_ptr<const std::string> buffer)
        : state_(std::move(state)), buffer_(std::move(buffer)) {}
    void Release();
    std::shared_ptr<State> state_;
    std::shared_ptr<const std::string> buffer_;
  };

  TraceStore(Dependencies deps, TraceStoreOptions options);
  ~TraceStore();
  TraceStore(const TraceStore&) = delete;
  TraceStore& operator=(const TraceStore&) = delete;

  // A keyed session of `scope` (its CaptureManager) began: Fetches of (scope, id, key) wait for
  // Complete from now on. Replaces a retained trace of the same (scope, id, key).
  Ticket Expect(const void* scope, const std::string& id, const std::string& key);
  // Delivers `trace` to the Fetches waiting on `ticket` and retains it (if it fits the bounds
  // and no newer Expect of the same triple replaced the ticket). Call once per ticket.
  void Complete(const Ticket& ticket, const std::shared_ptr<const StoredTrace>& trace);
  // Calls `done` exactly once with the trace of (scope, id, key), or NOT_FOUND; see the top.
  void Fetch(const void* scope, const std::string& id, const std::string& key, FetchCallback done);
  // Before a new capture: OK, or RESOURCE_EXHAUSTED naming the cap when streams nobody has read
  // yet hold more than max_held_bytes even with every retained trace evicted.
  absl::Status CheckCapacity();
  Hold HoldBuffer(std::shared_ptr<const std::string> buffer);

  uint64_t held_bytes() const;
  uint64_t retained_bytes() const;
  size_t retained_count() const;
  const TraceStoreOptions& options() const { return options_; }

 private:
  const TraceStoreOptions options_;
  std::shared_ptr<State> state_;
};

}  // namespace profctl::agent

#endif  // PROFCTL_AGENT_TRACE_STORE_H_

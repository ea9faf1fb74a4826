// When a failed host is tried again, and how long it waits first: pure decisions over what the
// session knows, so each rule is tested without a session (retry_policy_test.cc). The engine
// logs every attempt and schedules the retries.
#ifndef PROFCTL_COORDINATOR_ENGINE_RETRY_POLICY_H_
#define PROFCTL_COORDINATOR_ENGINE_RETRY_POLICY_H_

#include <cstdint>
#include <random>

#include "absl/status/status.h"
#include "profctl/v1/session.pb.h"

namespace profctl::coordinator {

// Failures that may pass on their own (the network, a restarting or busy agent, bytes damaged in
// transit). Never what the agent meant: a bad request, credentials, a session cancelled.
bool Retryable(absl::StatusCode code);

// Attempt n waits min(max, initial * 2^(n-1)), jittered to 50..100% of it, so hosts that failed
// together (a switch that blinked) do not all come back at one instant.
class RetryBackoff {
 public:
  // seed 0: from the OS's random source.
  RetryBackoff(int64_t initial_ms, int64_t max_ms, uint64_t seed);
  int64_t NextNs(int attempt);
  // The larger of NextNs(attempt) and `spread_ns` jittered to 75..100% of it (SpreadRetryNs: not
  // capped by max_ms, which bounds the doubling only).
  int64_t NextNs(int attempt, int64_t spread_ns);

 private:
  int64_t initial_ns_;
  int64_t max_ns_;
  std::mt19937_64 jitter_;
};

// A GetInfo round failed: worth another round only when the agent is not there (down,
// restarting); one that answers and refuses, or never answers, will not do better in a moment.
bool PrepareRetryWanted(absl::StatusCode code, bool cancelled, int round, int retries);

// Where a retried GetInfo round must still land for the host to join.
struct PrepareRetryWindow {
  bool preparing = true;         // the session-wide prepare phase is still on
  bool late_capture = true;      // --late=capture: a host may join after the start
  int64_t prepare_deadline = 0;  // monotonic ns: the prepare budget's end
  int64_t window_end = 0;        // monotonic ns: the capture window's end
  int64_t deadline = 0;          // monotonic ns: the session's deadline
};
// Before the budget with --late=fail, before the window closes with --late=capture, and before
// the deadline.
bool PrepareRetryFits(int64_t at, const PrepareRetryWindow& w);

// A Capture or Fetch attempt that failed.
struct CaptureFailure {
  absl::StatusCode code = absl::StatusCode::kOk;
  bool fetching = false;        // the attempt was a Fetch
  bool header_seen = false;     // the agent had started sending the trace
  bool agent_may_hold = false;  // before this failure: the agent may hold our session
  bool can_fetch = false;       // the client can Fetch (AgentClient::CanFetch)
};

struct CaptureFailureVerdict {
  bool retryable = false;
  // After this failure. A Fetch that finds nothing: the agent does not hold it (it never got our
  // Capture, or restarted since). A Capture that failed any other way than "busy with another"
  // may have reached the agent, which then records and keeps it for a Fetch.
  bool agent_may_hold = false;
  bool fetch = false;          // the next attempt fetches (rather than records again)
  bool capture_error = false;  // the attempt was a Capture: its error explains a later Fetch's
};
CaptureFailureVerdict JudgeCaptureFailure(const CaptureFailure& f);

// The last instant a new recording may start: within the tolerance of the window's start with
// --late=fail, before its end with --late=capture.
int64_t RecordCutoff(profctl::v1::LatePolicy late, int64_t window_start, int64_t window_end,
                     int64_t tolerance_ns);

// The least wait before the next retry of a host whose agent is not there (UNAVAILABLE: down,
// restarting, unreachable) while a recording can still start: the `retries_left` retries
// (including this one) share `time_left_ns` (to the record cutoff, or the deadline if sooner) in
// doubling shares, T/(2^(r+1)-1), 2T/(2^(r+1)-1), ..., so the last one still lands before the
// cutoff with as long again left to record. Retries of an agent that comes back within the
// window then are not all spent in the first few hundred ms of the outage. 0 when nothing is
// left or no retry is.
int64_t SpreadRetryNs(int64_t time_left_ns, int retries_left);

// Whether a failure gets its retries spread (SpreadRetryNs): the agent is not there. Refusals
// (busy, over its memory cap) and damaged bytes are retried at the plain backoff.
bool SpreadRetryWanted(absl::StatusCode code);

// A retry at `at` still does its job: before the deadline, and, recording again (not fetching),
// only while the window can still be (mostly) caught and nobody interrupted.
bool CaptureRetryFits(int64_t at, bool fetch, bool cancelled, int64_t deadline,
                      int64_t record_cutoff);

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_ENGINE_RETRY_POLICY_H_

// Waiting on a running capture through its session folder, for real-process tests that act while
// the agents record (interrupt, kill, freeze, restart one): the coordinator writes session.json
// (RUNNING) with the window's start, start_at_ns, as soon as the window is set, so the test waits
// for that file and then for an instant of the window, never for terminal text or a fixed time.
// Header-only, used by e2e_test.cc and fault_test.cc.
#ifndef PROFCTL_TESTS_SESSION_WINDOW_H_
#define PROFCTL_TESTS_SESSION_WINDOW_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/file_util.h"
#include "google/protobuf/util/json_util.h"
#include "profctl/v1/session.pb.h"

namespace profctl::testkit {

// The window start (start_at_ns, on the coordinator's wall clock) of the running session in
// `session_dir`; 0 while its session.json is missing, not yet written whole, written before the
// window was set, or no longer RUNNING (the capture ended). Never blocks.
inline int64_t WindowStartNs(const std::string& session_dir) {
  absl::StatusOr<std::string> json = ReadFile(JoinPath(session_dir, "session.json"));
  v1::SessionManifest m;
  if (!json.ok() || !google::protobuf::util::JsonStringToMessage(*json, &m).ok() ||
      m.status() != v1::SESSION_STATUS_RUNNING) {
    return 0;
  }
  return m.start_at_ns();
}

// Blocks until `clock`'s wall time reads `wall_ns` or later: for acting at an instant of a
// session's timeline (start_at_ns + x), which the coordinator and the agents on this host share.
// This is not a sleep that hopes for an order: the instant itself is the event, computed from
// what the coordinator wrote, and the test's assertions follow from where it lies in the window.
// Waits on the monotonic clock in slices of at most 10 ms and rereads the wall clock after each,
// so a step of the wall clock costs at most one slice. Bounded: a target more than `max_wait_ns`
// ahead is refused at once (returns false) rather than waited for.
inline bool WaitUntilWall(const Clock& clock, int64_t wall_ns,
                          int64_t max_wait_ns = 60 * kNanosPerSecond) {
  if (wall_ns - clock.WallNs() > max_wait_ns) return false;
  StopSignal never;
  for (int64_t left = wall_ns - clock.WallNs(); left > 0; left = wall_ns - clock.WallNs()) {
    clock.WaitUntil(clock.MonoNs() + std::min<int64_t>(left, 10 * kNanosPerMilli), never);
  }
  return true;
}

// Waits until the session in `session_dir` has been recording for `into_window_ns`: polls (every
// 20 ms) until its session.json is RUNNING with a window, then waits until the wall clock passes
// start_at_ns + into_window_ns. Returns start_at_ns; fails, saying which of the two did not
// happen, when `running()` turns false first (the coordinator exited) or no window was set
// within `timeout_ns`.
inline absl::StatusOr<int64_t> WaitIntoWindow(const Clock& clock, const std::string& session_dir,
                                              int64_t into_window_ns,
                                              const std::function<bool()>& running,
                                              int64_t timeout_ns = 20 * kNanosPerSecond) {
  const int64_t deadline = clock.MonoNs() + timeout_ns;
  StopSignal never;
  int64_t start_at = 0;
  while ((start_at = WindowStartNs(session_dir)) == 0) {
    if (!running()) {
      return absl::FailedPreconditionError(
          absl::StrCat("the capture ended before its window was set (no RUNNING session.json "
                       "with start_at_ns in ",
                       session_dir, ")"));
    }
    if (clock.MonoNs() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("no window set within ", timeout_ns / kNanosPerMilli,
                       " ms (no RUNNING session.json with start_at_ns in ", session_dir, ")"));
    }
    clock.WaitUntil(clock.MonoNs() + 20 * kNanosPerMilli, never);
  }
  if (!WaitUntilWall(clock, start_at + into_window_ns)) {
    return absl::OutOfRangeError(absl::StrCat("start_at_ns=", start_at, " is ",
                                              (start_at - clock.WallNs()) / kNanosPerMilli,
                                              " ms ahead of this host's clock"));
  }
  if (!running()) {
    return absl::FailedPreconditionError(absl::StrCat("the capture ended before it had recorded ",
                                                      into_window_ns / kNanosPerMilli, " ms"));
  }
  return start_at;
}

}  // namespace profctl::testkit

#endif  // PROFCTL_TESTS_SESSION_WINDOW_H_

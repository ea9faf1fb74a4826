// The prepare/start policy: how long the session waits for hosts to get ready, and how far ahead
// it puts the common start. Pure arithmetic over what preparing measured (the engine keeps the
// timers), so each rule is tested alone (start_policy_test.cc); the measurements behind the
// numbers are in docs/perf.md.
#ifndef PROFCTL_COORDINATOR_ENGINE_START_POLICY_H_
#define PROFCTL_COORDINATOR_ENGINE_START_POLICY_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace profctl::coordinator {

struct PrepareBudgetRules {
  int64_t min_budget_ns = 0;  // a derived budget is clamped to [min, max]
  int64_t max_budget_ns = 0;
  int64_t min_quiet_ns = 0;  // the quiet rule's floor
};

// What preparing knows when one more host got ready (or came alive).
struct PrepareProgress {
  const std::vector<int64_t>* ready_ns = nullptr;  // prepare times of hosts ready so far, in order
  size_t hosts = 0;
  int64_t started = 0;  // monotonic ns: preparing began
  int64_t now = 0;
  // The quiet rule may end preparing early: --late=capture (a slow host still joins, late) and
  // not prepare-only.
  bool quiet_rule = false;
  // A host not yet ready has answered something: one is on its way.
  bool one_on_its_way = false;
};

struct PrepareBudget {
  int64_t cap = 0;       // monotonic ns: the latest preparing may end (only ever shrinks)
  int64_t deadline = 0;  // monotonic ns: when it ends now, unless every host settles first
};

// The first half of the hosts to be ready sets the budget to 4 x their median prepare time; at
// 90 % it is at most 2 x the slowest of them (a tail of dead or hung hosts then costs the others
// no more than the healthy hosts' own spread says). With the quiet rule, once 90 % are ready,
// preparing also ends when no other host got ready for a quarter of the time the last one took
// (at least min_quiet_ns; only min_quiet_ns when no host left has answered anything), never
// before the budget's floor.
PrepareBudget NextPrepareBudget(const PrepareProgress& p, int64_t cap,
                                const PrepareBudgetRules& rules);

// A host still preparing whose answers are arriving (slowly: a long link) is ready, at the
// latest, once its `samples_left` clock samples came back, each taking its last round trip and a
// quarter more: preparing waits for that (within the budget's maximum) instead of leaving a
// healthy host out because its link is slow. 0 when nothing was measured yet.
int64_t ProjectedReadyNs(int64_t last_answer_mono, int64_t last_rtt_ns, int samples_left);

// What a host not ready when preparing ended had done, for its error: "GetInfo unanswered after
// 2000 ms", or "GetInfo answered after 600 ms; 2 of its clock samples answered, each answer took
// 600 ms (a slow link: --prepare-timeout gives it longer)".
std::string PrepareProgressText(bool info_done, int64_t info_rtt_ns, int samples_answered,
                                int64_t last_rtt_ns, int64_t waited_ns);

// How far after preparing ends the common start lies: every Capture must reach its agent before
// it. Twice the largest round trip covers the one-way trip even on a one-sided path; sending the
// Captures one after another costs twice one RPC on a connected channel per host (at least
// 20 us). `min_lead_ns` is a floor, not a margin on top.
int64_t StartLeadNs(int64_t min_lead_ns, int64_t max_rtt_ns, size_t ready_hosts,
                    int64_t per_host_send_ns);

// Whether the capture can go ahead once preparing ended: enough hosts can still be saved
// (`possible` of `hosts`, `min_hosts` required), and the window ends before the deadline.
// FAILED_PRECONDITION or DEADLINE_EXCEEDED saying why not.
absl::Status CheckCaptureCanStart(size_t possible, size_t hosts, size_t min_hosts,
                                  int64_t window_end, int64_t deadline);

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_ENGINE_START_POLICY_H_

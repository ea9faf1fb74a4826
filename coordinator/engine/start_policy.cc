#include "coordinator/engine/start_policy.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_format.h"
#include "common/clock.h"

namespace profctl::coordinator {

PrepareBudget NextPrepareBudget(const PrepareProgress& p, int64_t cap,
                                const PrepareBudgetRules& rules) {
  const std::vector<int64_t>& ready_ns = *p.ready_ns;
  const size_t ready = ready_ns.size(), all = p.hosts;
  std::optional<int64_t> budget;  // when a rule fires now
  if (ready * 2 >= all && (ready - 1) * 2 < all) {
    std::vector<int64_t> t = ready_ns;
    std::nth_element(t.begin(), t.begin() + static_cast<ptrdiff_t>(t.size() / 2), t.end());
    budget = 4 * t[t.size() / 2];
  } else if (ready * 10 >= all * 9 && (ready - 1) * 10 < all * 9) {
    budget = 2 * *std::max_element(ready_ns.begin(), ready_ns.end());
  }
  PrepareBudget out{cap, cap};
  if (budget.has_value()) {
    const int64_t b = std::clamp(*budget, rules.min_budget_ns, rules.max_budget_ns);
    if (p.started + b < cap) out.cap = p.started + b;
  }
  out.deadline = out.cap;
  if (ready * 10 >= all * 9 && p.quiet_rule) {
    const int64_t quiet =
        p.one_on_its_way ? std::max(rules.min_quiet_ns, ready_ns.back() / 4) : rules.min_quiet_ns;
    out.deadline = std::min(out.deadline, std::max(p.now + quiet, p.started + rules.min_budget_ns));
  }
  return out;
}

int64_t ProjectedReadyNs(int64_t last_answer_mono, int64_t last_rtt_ns, int samples_left) {
  if (last_answer_mono <= 0 || last_rtt_ns <= 0) return 0;
  const int64_t per_sample = last_rtt_ns + last_rtt_ns / 4;
  return last_answer_mono + static_cast<int64_t>(std::max(0, samples_left)) * per_sample;
}

std::string PrepareProgressText(bool info_done, int64_t info_rtt_ns, int samples_answered,
                                int64_t last_rtt_ns, int64_t waited_ns) {
  const auto ms = [](int64_t ns) { return static_cast<double>(ns) / kNanosPerMilli; };
  if (!info_done) return absl::StrFormat("GetInfo unanswered after %.0f ms", ms(waited_ns));
  if (samples_answered == 0) {
    return absl::StrFormat("GetInfo answered after %.0f ms; clock sync unanswered after %.0f ms",
                           ms(info_rtt_ns), ms(waited_ns));
  }
  return absl::StrFormat(
      "GetInfo answered after %.0f ms; clock sync unfinished: %d sample(s) answered, each answer "
      "took %.0f ms (a slow link: --prepare-timeout gives it longer)",
      ms(info_rtt_ns), samples_answered, ms(last_rtt_ns));
}

int64_t StartLeadNs(int64_t min_lead_ns, int64_t max_rtt_ns, size_t ready_hosts,
                    int64_t per_host_send_ns) {
  return std::max(min_lead_ns, 2 * max_rtt_ns + static_cast<int64_t>(ready_hosts) *
                                                    std::max<int64_t>(20 * kNanosPerMicro,
                                                                      2 * per_host_send_ns));
}

absl::Status CheckCaptureCanStart(size_t possible, size_t hosts, size_t min_hosts,
                                  int64_t window_end, int64_t deadline) {
  if (possible < min_hosts) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "only %d of %d hosts ready and %d required (--min-hosts/--require-all): nothing captured",
        possible, hosts, min_hosts));
  }
  if (window_end >= deadline) {
    return absl::DeadlineExceededError(absl::StrFormat(
        "the session deadline leaves no room for the window: it would end %.0f ms after it",
        static_cast<double>(window_end - deadline) / kNanosPerMilli));
  }
  return absl::OkStatus();
}

}  // namespace profctl::coordinator

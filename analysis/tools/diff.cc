#include "analysis/tools/diff.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace profctl::analysis {

namespace {

int64_t RoundNs(double ns) { return std::llround(ns); }

// Per host: how many steps it was named straggler in, per cause.
using CauseCounts = absl::flat_hash_map<std::string, std::array<int64_t, kNumCategories>>;

CauseCounts CountCauses(const PodBreakdown& b) {
  CauseCounts counts;
  for (const PodStep& s : b.steps) {
    if (s.straggler.empty()) continue;
    counts[s.straggler][static_cast<size_t>(s.cause)]++;
  }
  return counts;
}

// The most frequent cause (the first category on ties); kIdle when never named.
Category TopCause(const CauseCounts& counts, const std::string& host) {
  const auto it = counts.find(host);
  if (it == counts.end()) return Category::kIdle;
  size_t best = static_cast<size_t>(Category::kIdle);
  int64_t best_n = 0;
  for (size_t c = 0; c < it->second.size(); ++c) {
    if (it->second[c] > best_n) {
      best = c;
      best_n = it->second[c];
    }
  }
  return static_cast<Category>(best);
}

// The pod's straggler as its verdict names it (PodVerdict: none when it names no one).
StragglerSummary Straggler(const PodBreakdown& b) {
  StragglerSummary s;
  const StragglerVerdict& v = b.verdict.straggler;
  if (v.finding != Finding::kFound) return s;
  s.host = v.host;
  s.steps = v.steps;
  s.cause = v.cause.value_or(Category::kIdle);
  return s;
}

void FillSide(const HostReport& h, int64_t rank, const CauseCounts& counts, bool side_b,
              HostDiff* d) {
  auto set = [side_b](Change& c, int64_t v) { (side_b ? c.b : c.a) = v; };
  set(d->steps, h.steps);
  set(d->step_time_ns, RoundNs(h.step_time.mean_ns));
  for (size_t c = 0; c < kNumCategories; ++c) {
    set(d->categories[c], RoundNs(h.categories[c].mean_ns));
  }
  set(d->straggler_steps, h.straggler_steps);
  (side_b ? d->cause_b : d->cause_a) = TopCause(counts, h.host);
  (side_b ? d->in_b : d->in_a) = true;
  (side_b ? d->host_b : d->host_a) = h.host;
  (side_b ? d->rank_b : d->rank_a) = rank;
}

struct NameTotals {
  int64_t total_ns = 0;
  int64_t occurrences = 0;
};
// A kernel list row: its transfer kind (-1: a kernel) and name.
using RowKey = std::pair<int, std::string>;
constexpr int kKernelRow = -1;

// Time per step: the total over the side's pod steps (the total itself with no steps).
int64_t PerStep(int64_t total_ns, int64_t steps) {
  return steps > 0 ? RoundNs(static_cast<double>(total_ns) / static_cast<double>(steps)) : total_ns;
}

std::vector<NameDiff> TopChanges(const std::map<RowKey, NameTotals>& a,
                                 const std::map<RowKey, NameTotals>& b, int64_t steps_a,
                                 int64_t steps_b, size_t top_n) {
  std::map<RowKey, NameDiff> all;
  for (const auto& [key, t] : a) {
    NameDiff& d = all[key];
    d.total_ns.a = t.total_ns;
    d.occurrences.a = t.occurrences;
  }
  for (const auto& [key, t] : b) {
    NameDiff& d = all[key];
    d.total_ns.b = t.total_ns;
    d.occurrences.b = t.occurrences;
  }
  std::vector<NameDiff> out;
  for (auto& [key, d] : all) {
    d.name = key.second;
    if (key.first != kKernelRow) d.transfer = static_cast<TransferKind>(key.first);
    d.ns_per_step = {PerStep(d.total_ns.a, steps_a), PerStep(d.total_ns.b, steps_b)};
    if (d.ns_per_step.delta() != 0) out.push_back(std::move(d));
  }
  std::sort(out.begin(), out.end(), [](const NameDiff& x, const NameDiff& y) {
    const int64_t dx = std::llabs(x.ns_per_step.delta());
    const int64_t dy = std::llabs(y.ns_per_step.delta());
    if (dx != dy) return dx > dy;
    return x.name < y.name;
  });
  if (out.size() > top_n) out.resize(top_n);
  return out;
}

// Kernels by name, and the copies and memsets by (kind, name).
std::map<RowKey, NameTotals> KernelTotals(absl::Span<const KernelStat> kernels,
                                          absl::Span<const DeviceTransferStat> transfers) {
  std::map<RowKey, NameTotals> m;
  for (const KernelStat& k : kernels) {
    NameTotals& t = m[{kKernelRow, k.kernel}];
    t.total_ns += k.total_ns;
    t.occurrences += k.occurrences;
  }
  for (const DeviceTransferStat& x : transfers) {
    NameTotals& t = m[{static_cast<int>(x.kind), x.name}];
    t.total_ns += x.total_ns;
    t.occurrences += x.occurrences;
  }
  return m;
}

// Ops by their device self time when they launched kernels, else their host self time.
std::map<RowKey, NameTotals> OpTotals(absl::Span<const OpStat> ops) {
  std::map<RowKey, NameTotals> m;
  for (const OpStat& o : ops) {
    NameTotals& t = m[{kKernelRow, o.name}];
    t.total_ns += o.device_self_ns > 0 ? o.device_self_ns : o.host_self_ns;
    t.occurrences += o.occurrences;
  }
  return m;
}

// --- Pairing ------------------------------------------------------------------------------------

// A host name's role and its numbers: "worker-12.zone3" -> ("worker-#.zone#", {12, 3}).
struct Role {
  std::string key;
  std::vector<int64_t> numbers;
};
Role RoleOf(const std::string& name) {
  Role r;
  for (size_t i = 0; i < name.size();) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(name[i]))) {
      r.key.push_back(name[i++]);
      continue;
    }
    int64_t n = 0;
    for (; i < name.size() && absl::ascii_isdigit(static_cast<unsigned char>(name[i])); ++i) {
      n = std::min<int64_t>(n * 10 + (name[i] - '0'), std::numeric_limits<int64_t>::max() / 10);
    }
    r.key.push_back('#');
    r.numbers.push_back(n);
  }
  return r;
}

std::string JoinShort(absl::Span<const std::string> names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < 3; ++i)
    absl::StrAppend(&out, i > 0 ? ", " : "", names[i]);
  if (names.size() > 3) absl::StrAppend(&out, " and ", names.size() - 3, " more");
  return out;
}

// --- The headline -------------------------------------------------------------------------------

std::string SignedMs(int64_t ns) { return absl::StrFormat("%+.1f", static_cast<double>(ns) / 1e6); }

// "4,608", "0.5", "12.3" (one decimal below 100 when not whole).
std::string Count(int64_t milli) {
  const int64_t whole = milli / 1000;
  if (milli % 1000 != 0 && milli < 100'000) {
    return absl::StrFormat("%.1f", static_cast<double>(milli) / 1000.0);
  }
  std::string digits = absl::StrCat(whole);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

// The name cut to `max` characters in the middle.
std::string Shorten(const std::string& s, size_t max = 80) {
  if (s.size() <= max) return s;
  return absl::StrCat(s.substr(0, max / 2 - 2), "...", s.substr(s.size() - (max / 2 - 1)));
}

struct Candidate {
  DiffHeadline::What what = DiffHeadline::What::kNothing;
  std::string name;
  Change ns;      // per step, average host
  Change milli;   // occurrences per step, average host, in thousandths; -1: none
  int order = 0;  // ties: the more specific first
};

// Per step and host: total / (steps x hosts).
int64_t PerStepHost(int64_t total, int64_t steps, int64_t hosts, int64_t scale = 1) {
  const double d = static_cast<double>(std::max<int64_t>(steps, 1)) *
                   static_cast<double>(std::max<int64_t>(hosts, 1));
  return RoundNs(static_cast<double>(total) * static_cast<double>(scale) / d);
}

// The category a candidate belongs to (its time counts there), when it is one of these.
std::optional<Category> CategoryOf(const Candidate& c) {
  if (c.what == DiffHeadline::What::kTransfer) {
    if (c.name == TransferKindName(TransferKind::kDeviceToDevice)) return Category::kDeviceToDevice;
    if (c.name == TransferKindName(TransferKind::kHostToDevice)) return Category::kInput;
    if (c.name == TransferKindName(TransferKind::kDeviceToHost)) return Category::kOutput;
    return Category::kCompute;  // memsets
  }
  if (c.what == DiffHeadline::What::kKernel) return Category::kCompute;
  return std::nullopt;
}

std::string Describe(const Candidate& c, bool several_hosts) {
  std::string s = absl::StrCat(
      c.what == DiffHeadline::What::kCategory ? absl::StrCat(c.name, " time") : Shorten(c.name),
      " ", SignedMs(c.ns.delta()), " ms per step");
  if (c.milli.a >= 0) {
    absl::StrAppend(&s, " (", Count(c.milli.a), " -> ", Count(c.milli.b), " a step)");
  } else {
    absl::StrAppend(&s, absl::StrFormat(" (%.1f -> %.1f ms)", static_cast<double>(c.ns.a) / 1e6,
                                        static_cast<double>(c.ns.b) / 1e6));
  }
  if (several_hosts) absl::StrAppend(&s, " on the average host");
  return s;
}

DiffHeadline Headline(const Diff& d, const std::map<RowKey, NameTotals>& ka,
                      const std::map<RowKey, NameTotals>& kb,
                      const std::map<RowKey, NameTotals>& oa,
                      const std::map<RowKey, NameTotals>& ob) {
  const int64_t hosts_a = std::max<int64_t>(d.pod_hosts.a, 1);
  const int64_t hosts_b = std::max<int64_t>(d.pod_hosts.b, 1);
  std::vector<Candidate> all;
  for (size_t c = 0; c < kNumCategories; ++c) {
    all.push_back({DiffHeadline::What::kCategory,
                   std::string(CategoryName(static_cast<Category>(c))),
                   d.pod_categories[c],
                   {-1, -1},
                   3});
  }
  const auto add_rows = [&](const std::map<RowKey, NameTotals>& a,
                            const std::map<RowKey, NameTotals>& b, bool ops) {
    std::map<RowKey, std::pair<NameTotals, NameTotals>> rows;
    for (const auto& [k, t] : a) rows[k].first = t;
    for (const auto& [k, t] : b) rows[k].second = t;
    for (const auto& [k, t] : rows) {
      Candidate c;
      c.what = ops                     ? DiffHeadline::What::kOp
               : k.first == kKernelRow ? DiffHeadline::What::kKernel
                                       : DiffHeadline::What::kTransfer;
      if (c.what == DiffHeadline::What::kTransfer) continue;  // per kind below
      c.name = k.second;
      c.ns = {PerStepHost(t.first.total_ns, d.pod_steps.a, hosts_a),
              PerStepHost(t.second.total_ns, d.pod_steps.b, hosts_b)};
      c.milli = {PerStepHost(t.first.occurrences, d.pod_steps.a, hosts_a, 1000),
                 PerStepHost(t.second.occurrences, d.pod_steps.b, hosts_b, 1000)};
      c.order = ops ? 4 : 1;
      all.push_back(std::move(c));
    }
  };
  add_rows(ka, kb, /*ops=*/false);
  add_rows(oa, ob, /*ops=*/true);
  for (const TransferDiff& t : d.transfers) {
    all.push_back({DiffHeadline::What::kTransfer,
                   std::string(TransferKindName(t.kind)),
                   {PerStepHost(t.total_ns.a, d.pod_steps.a, hosts_a),
                    PerStepHost(t.total_ns.b, d.pod_steps.b, hosts_b)},
                   {PerStepHost(t.occurrences.a, d.pod_steps.a, hosts_a, 1000),
                    PerStepHost(t.occurrences.b, d.pod_steps.b, hosts_b, 1000)},
                   0});
  }
  const Candidate* best = nullptr;
  for (const Candidate& c : all) {
    const int64_t m = std::llabs(c.ns.delta());
    if (best == nullptr || m > std::llabs(best->ns.delta()) ||
        (m == std::llabs(best->ns.delta()) &&
         std::tie(c.order, c.name) < std::tie(best->order, best->name))) {
      best = &c;
    }
  }
  DiffHeadline h;
  // Below 0.05 ms per step a change prints as +0.0: nothing to say.
  constexpr int64_t kSmallest = 50'000;
  if (best == nullptr || std::llabs(best->ns.delta()) < kSmallest) {
    h.sentence = "nothing changed by 0.05 ms per step or more";
    return h;
  }
  const bool several = hosts_a > 1 || hosts_b > 1;
  h.what = best->what;
  h.name = best->name;
  h.ns_per_step = best->ns;
  h.milli_count_per_step = best->milli;
  h.sentence = Describe(*best, several);
  if (best->what == DiffHeadline::What::kCategory) {
    // The kernel or copies that make most of it, when one does (same sign, at least half).
    // The categories are the first candidates, in Category order.
    const auto category = static_cast<Category>(best - all.data());
    const Candidate* part = nullptr;
    for (const Candidate& c : all) {
      if (CategoryOf(c) != category) continue;
      const bool same_sign = (c.ns.delta() > 0) == (best->ns.delta() > 0);
      if (!same_sign || 2 * std::llabs(c.ns.delta()) < std::llabs(best->ns.delta())) continue;
      if (part == nullptr || std::llabs(c.ns.delta()) > std::llabs(part->ns.delta())) part = &c;
    }
    if (part != nullptr) absl::StrAppend(&h.sentence, ", mostly ", Describe(*part, false));
  }
  return h;
}

}  // namespace

absl::string_view TransferKindName(TransferKind kind) {
  switch (kind) {
    case TransferKind::kHostToDevice:
      return "host-to-device copies";
    case TransferKind::kDeviceToHost:
      return "device-to-host copies";
    case TransferKind::kDeviceToDevice:
      return "device-to-device copies";
    case TransferKind::kMemset:
      return "memsets";
  }
  return "copies";
}

absl::string_view TransferKindShortName(TransferKind kind) {
  switch (kind) {
    case TransferKind::kHostToDevice:
      return "copy h2d";
    case TransferKind::kDeviceToHost:
      return "copy d2h";
    case TransferKind::kDeviceToDevice:
      return "copy d2d";
    case TransferKind::kMemset:
      return "memset";
  }
  return "copy";
}

absl::string_view HostPairingName(HostPairing pairing) {
  switch (pairing) {
    case HostPairing::kUnpaired:
      return "";
    case HostPairing::kRank:
      return "rank";
    case HostPairing::kName:
      return "name";
    case HostPairing::kSingle:
      return "single";
    case HostPairing::kRole:
      return "role";
    case HostPairing::kPosition:
      return "position";
  }
  return "";
}

std::vector<DeviceTransferStat> ComputeDeviceTransfers(const ToolTrace& trace) {
  std::map<std::pair<std::string, int>, DeviceTransferStat> by;
  for (const DeviceEvent& e : trace.device_events) {
    if (e.is_kernel) continue;
    TransferKind kind = TransferKind::kMemset;
    switch (e.kind) {
      case OpKind::kMemcpyH2D:
        kind = TransferKind::kHostToDevice;
        break;
      case OpKind::kMemcpyD2H:
        kind = TransferKind::kDeviceToHost;
        break;
      case OpKind::kMemcpyD2D:
        kind = TransferKind::kDeviceToDevice;
        break;
      case OpKind::kDeviceCompute:
        kind = TransferKind::kMemset;
        break;
      default:
        continue;  // not a copy or memset (a collective that is not a kernel launch)
    }
    const std::string name(trace.Str(e.name));
    DeviceTransferStat& s = by[{name, static_cast<int>(kind)}];
    s.name = name;
    s.kind = kind;
    ++s.occurrences;
    s.total_ns += std::max<int64_t>(0, e.end_ns - e.start_ns);
  }
  std::vector<DeviceTransferStat> out;
  out.reserve(by.size());
  for (auto& [key, s] : by) out.push_back(std::move(s));
  std::sort(out.begin(), out.end(), [](const DeviceTransferStat& x, const DeviceTransferStat& y) {
    return std::tie(y.total_ns, x.name, x.kind) < std::tie(x.total_ns, y.name, y.kind);
  });
  return out;
}

std::vector<DeviceTransferStat> MergeDeviceTransfers(
    const std::vector<std::vector<DeviceTransferStat>>& hosts) {
  std::map<std::pair<std::string, int>, DeviceTransferStat> by;
  for (const std::vector<DeviceTransferStat>& host : hosts) {
    for (const DeviceTransferStat& x : host) {
      DeviceTransferStat& s = by[{x.name, static_cast<int>(x.kind)}];
      s.name = x.name;
      s.kind = x.kind;
      s.occurrences += x.occurrences;
      s.total_ns += x.total_ns;
    }
  }
  std::vector<DeviceTransferStat> out;
  out.reserve(by.size());
  for (auto& [key, s] : by) out.push_back(std::move(s));
  std::sort(out.begin(), out.end(), [](const DeviceTransferStat& x, const DeviceTransferStat& y) {
    return std::tie(y.total_ns, x.name, x.kind) < std::tie(x.total_ns, y.name, y.kind);
  });
  return out;
}

double Change::pct() const {
  if (a == 0) return std::numeric_limits<double>::quiet_NaN();
  return 100.0 * static_cast<double>(b - a) / static_cast<double>(a);
}

HostPairs PairHosts(absl::Span<const std::string> a_names, absl::Span<const int64_t> a_ranks,
                    absl::Span<const std::string> b_names, absl::Span<const int64_t> b_ranks) {
  HostPairs out;
  const size_t na = a_names.size();
  const size_t nb = b_names.size();
  out.b_of_a.assign(na, std::nullopt);
  std::vector<bool> taken(nb, false);
  size_t paired = 0;
  const auto pair = [&](size_t i, size_t j) {
    out.b_of_a[i] = j;
    taken[j] = true;
    ++paired;
  };
  const auto rank_of = [](absl::Span<const int64_t> ranks, size_t i) {
    return i < ranks.size() ? ranks[i] : -1;
  };
  // 1. The same rank, stated by both traces.
  absl::flat_hash_map<int64_t, size_t> b_by_rank;
  for (size_t j = 0; j < nb; ++j) {
    if (const int64_t r = rank_of(b_ranks, j); r >= 0) b_by_rank.emplace(r, j);
  }
  for (size_t i = 0; i < na; ++i) {
    const int64_t r = rank_of(a_ranks, i);
    if (r < 0) continue;
    const auto it = b_by_rank.find(r);
    if (it != b_by_rank.end() && !taken[it->second]) pair(i, it->second);
  }
  if (paired > 0) out.method = HostPairing::kRank;
  // 2. The same name.
  absl::flat_hash_map<std::string, size_t> b_by_name;
  for (size_t j = 0; j < nb; ++j) b_by_name.emplace(b_names[j], j);
  const size_t by_rank = paired;
  for (size_t i = 0; i < na; ++i) {
    if (out.b_of_a[i].has_value()) continue;
    const auto it = b_by_name.find(a_names[i]);
    if (it != b_by_name.end() && !taken[it->second]) pair(i, it->second);
  }
  if (paired > by_rank && by_rank == 0) out.method = HostPairing::kName;
  if (paired == 0 && na == 1 && nb == 1) {
    // 3. One host a side.
    pair(0, 0);
    out.method = HostPairing::kSingle;
  }
  if (paired == 0) {
    // 4. The same role, in the order of the names' numbers.
    std::map<std::string, std::pair<std::vector<size_t>, std::vector<size_t>>> roles;
    std::vector<Role> ra(na), rb(nb);
    for (size_t i = 0; i < na; ++i) {
      ra[i] = RoleOf(a_names[i]);
      roles[ra[i].key].first.push_back(i);
    }
    for (size_t j = 0; j < nb; ++j) {
      rb[j] = RoleOf(b_names[j]);
      roles[rb[j].key].second.push_back(j);
    }
    for (auto& [key, sides] : roles) {
      auto& [ai, bj] = sides;
      std::stable_sort(ai.begin(), ai.end(), [&](size_t x, size_t y) {
        return std::tie(ra[x].numbers, a_names[x]) < std::tie(ra[y].numbers, a_names[y]);
      });
      std::stable_sort(bj.begin(), bj.end(), [&](size_t x, size_t y) {
        return std::tie(rb[x].numbers, b_names[x]) < std::tie(rb[y].numbers, b_names[y]);
      });
      for (size_t k = 0; k < ai.size() && k < bj.size(); ++k) pair(ai[k], bj[k]);
    }
    if (paired > 0) out.method = HostPairing::kRole;
  }
  if (paired == 0 && na == nb) {
    // 5. The same place in each side's order.
    for (size_t i = 0; i < na; ++i) pair(i, i);
    if (paired > 0) out.method = HostPairing::kPosition;
  }
  std::vector<std::string> only_a, only_b;
  for (size_t i = 0; i < na; ++i) {
    if (!out.b_of_a[i].has_value()) only_a.push_back(a_names[i]);
  }
  for (size_t j = 0; j < nb; ++j) {
    if (!taken[j]) only_b.push_back(b_names[j]);
  }
  if (paired == 0 && na > 0 && nb > 0) {
    out.note = absl::StrCat("no host paired: the runs share no rank, name or role, and A has ", na,
                            na == 1 ? " host" : " hosts", ", B ", nb);
  } else if (!only_a.empty() || !only_b.empty()) {
    out.note = absl::StrCat(only_a.empty() ? "" : absl::StrCat("only in A: ", JoinShort(only_a)),
                            !only_a.empty() && !only_b.empty() ? "; " : "",
                            only_b.empty() ? "" : absl::StrCat("only in B: ", JoinShort(only_b)));
  }
  return out;
}

Diff ComputeDiff(const DiffInput& a, const DiffInput& b, const DiffOptions& options) {
  const PodBreakdown& pa = *a.breakdown;
  const PodBreakdown& pb = *b.breakdown;
  Diff d;
  d.pod_steps = {static_cast<int64_t>(pa.steps.size()), static_cast<int64_t>(pb.steps.size())};
  d.pod_step_time_ns = {RoundNs(pa.pod_step_time.mean_ns), RoundNs(pb.pod_step_time.mean_ns)};
  const auto average_host = [](const PodBreakdown& p, std::array<Change, kNumCategories>& out,
                               bool side_b) {
    int64_t n = 0;
    std::array<double, kNumCategories> sum{};
    for (const HostReport& h : p.hosts) {
      if (h.steps == 0) continue;
      ++n;
      for (size_t c = 0; c < kNumCategories; ++c) sum[c] += h.categories[c].mean_ns;
    }
    for (size_t c = 0; c < kNumCategories; ++c) {
      (side_b ? out[c].b : out[c].a) = n > 0 ? RoundNs(sum[c] / static_cast<double>(n)) : 0;
    }
    return n;
  };
  d.pod_hosts = {average_host(pa, d.pod_categories, false),
                 average_host(pb, d.pod_categories, true)};

  // Pairs.
  std::vector<std::string> names_a, names_b;
  for (const HostReport& h : pa.hosts) names_a.push_back(h.host);
  for (const HostReport& h : pb.hosts) names_b.push_back(h.host);
  const HostPairs pairs = PairHosts(names_a, a.ranks, names_b, b.ranks);
  d.pairing = pairs.method;
  d.pairing_note = pairs.note;
  const auto rank = [](absl::Span<const int64_t> ranks, size_t i) {
    return i < ranks.size() ? ranks[i] : int64_t{-1};
  };
  const CauseCounts causes_a = CountCauses(pa);
  const CauseCounts causes_b = CountCauses(pb);
  // Each host's display name: a pair whose names differ is "A-name / B-name".
  absl::flat_hash_map<std::string, std::string> shown_a, shown_b;
  std::vector<bool> b_paired(pb.hosts.size(), false);
  for (size_t i = 0; i < pa.hosts.size(); ++i) {
    HostDiff& h = d.hosts.emplace_back();
    FillSide(pa.hosts[i], rank(a.ranks, i), causes_a, /*side_b=*/false, &h);
    h.host = pa.hosts[i].host;
    if (const std::optional<size_t> j = pairs.b_of_a[i]; j.has_value()) {
      b_paired[*j] = true;
      FillSide(pb.hosts[*j], rank(b.ranks, *j), causes_b, /*side_b=*/true, &h);
      if (h.host_a == h.host_b) {
        h.pairing = rank(a.ranks, i) >= 0 && rank(a.ranks, i) == rank(b.ranks, *j)
                        ? HostPairing::kRank
                        : HostPairing::kName;
      } else {
        h.pairing = rank(a.ranks, i) >= 0 && rank(a.ranks, i) == rank(b.ranks, *j)
                        ? HostPairing::kRank
                        : pairs.method;
        h.host = absl::StrCat(h.host_a, " / ", h.host_b);
      }
      shown_b[h.host_b] = h.host;
    }
    shown_a[h.host_a] = h.host;
  }
  for (size_t j = 0; j < pb.hosts.size(); ++j) {
    if (b_paired[j]) continue;
    HostDiff& h = d.hosts.emplace_back();
    FillSide(pb.hosts[j], rank(b.ranks, j), causes_b, /*side_b=*/true, &h);
    h.host = pb.hosts[j].host;
    shown_b[h.host_b] = h.host;
  }
  const auto shown = [](const absl::flat_hash_map<std::string, std::string>& m,
                        const std::string& host) {
    const auto it = m.find(host);
    return it == m.end() ? host : it->second;
  };

  d.straggler_a = Straggler(pa);
  d.straggler_b = Straggler(pb);
  // Compared through the pairs: the same host is the same pair.
  const std::string pair_a = d.straggler_a.host.empty() ? "" : shown(shown_a, d.straggler_a.host);
  const std::string pair_b = d.straggler_b.host.empty() ? "" : shown(shown_b, d.straggler_b.host);
  d.straggler_changed = pair_a != pair_b;
  d.cause_changed =
      !d.straggler_changed && !pair_a.empty() && d.straggler_a.cause != d.straggler_b.cause;
  d.consistently_slow_a = pa.verdict.consistently_slow.HostNames();
  d.consistently_slow_b = pb.verdict.consistently_slow.HostNames();

  for (const HostOutlier& o : pa.verdict.stands_out.hosts) {
    OutlierDiff& od = d.outliers.emplace_back();
    od.host = shown(shown_a, o.host);
    od.category = o.category;
    od.in_a = true;
    od.median_excess_ns.a = o.median_excess_ns;
  }
  for (const HostOutlier& o : pb.verdict.stands_out.hosts) {
    const std::string host = shown(shown_b, o.host);
    auto it = std::find_if(d.outliers.begin(), d.outliers.end(), [&](const OutlierDiff& od) {
      return od.host == host && od.category == o.category;
    });
    if (it == d.outliers.end()) {
      it = d.outliers.emplace(d.outliers.end());
      it->host = host;
      it->category = o.category;
    }
    it->in_b = true;
    it->median_excess_ns.b = o.median_excess_ns;
  }

  d.has_tools = a.has_tools && b.has_tools;
  std::map<RowKey, NameTotals> ka, kb, oa, ob;
  if (d.has_tools) {
    ka = KernelTotals(a.kernels, a.transfers);
    kb = KernelTotals(b.kernels, b.transfers);
    oa = OpTotals(a.ops);
    ob = OpTotals(b.ops);
    d.kernels = TopChanges(ka, kb, d.pod_steps.a, d.pod_steps.b, options.top_n);
    d.ops = TopChanges(oa, ob, d.pod_steps.a, d.pod_steps.b, options.top_n);
    std::array<TransferDiff, kNumTransferKinds> kinds{};
    std::array<bool, kNumTransferKinds> seen{};
    const auto add = [&](absl::Span<const DeviceTransferStat> xs, bool side_b) {
      for (const DeviceTransferStat& x : xs) {
        const auto k = static_cast<size_t>(x.kind);
        seen[k] = true;
        (side_b ? kinds[k].total_ns.b : kinds[k].total_ns.a) += x.total_ns;
        (side_b ? kinds[k].occurrences.b : kinds[k].occurrences.a) += x.occurrences;
      }
    };
    add(a.transfers, false);
    add(b.transfers, true);
    for (size_t k = 0; k < kNumTransferKinds; ++k) {
      if (!seen[k]) continue;
      TransferDiff& t = kinds[k];
      t.kind = static_cast<TransferKind>(k);
      t.ns_per_step = {PerStep(t.total_ns.a, d.pod_steps.a), PerStep(t.total_ns.b, d.pod_steps.b)};
      d.transfers.push_back(t);
    }
  }
  d.headline = Headline(d, ka, kb, oa, ob);
  return d;
}

}  // namespace profctl::analysis

// DecodeXSpaceHost's one pass against what it replaces: the hang verdict's record, alignment's
// collective ends and session.json's counts as the readers over a decoded XSpace made them
// (the reference below is that code, kept here as the test's oracle), on seeded random traces
// that mix every case those rules tell apart, on the synthetic job (healthy and hung), and on a
// real capture.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "analysis/alignment.h"
#include "analysis/hang_verdict.h"
#include "analysis/op_classify.h"
#include "analysis/readers/xspace_reader.h"
#include "common/byte_source.h"
#include "common/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "synthetic/synthetic_job.h"
#include "tests/status_matchers.h"
#include "tests/test_time.h"
#include "tests/trace_data.h"
#include "xspace/xspace.h"

namespace profctl::analysis {
namespace {

using ::profctl::test_data::DataPath;
using ::profctl::testkit::IsOk;
using tensorflow::profiler::XEvent;
using tensorflow::profiler::XLine;
using tensorflow::profiler::XPlane;
using tensorflow::profiler::XSpace;
using ::testing::IsEmpty;
using ::testing::Not;

// --- the reference: the readers over a decoded XSpace that the one pass replaces --------------
namespace reference {

bool IsNcclApiName(absl::string_view name) {
  return absl::StartsWithIgnoreCase(name, "nccl") || absl::StartsWithIgnoreCase(name, "rccl");
}

bool IsDevicePlane(absl::string_view name) {
  return absl::StartsWith(name, xspace::kGpuPlanePrefix) ||
         absl::StartsWith(name, xspace::kTpuPlanePrefix) ||
         absl::StartsWith(name, xspace::kCustomPlanePrefix);
}

// One step of the host: the union of its markers of one number.
struct StepSpan {
  int64_t step = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  bool cut = false;
};

// The steps of the host plane, by start.
std::vector<StepSpan> ReadSteps(const XPlane& host, int64_t base, const StepMatcher& matcher) {
  const xspace::XPlaneReader reader(host);
  std::map<int64_t, StepSpan> by_num;
  reader.ForEachEvent([&](const XLine& line, const XEvent& e) {
    std::optional<int64_t> step;
    const std::optional<int64_t> root = reader.IntStat(e, xspace::kStatIsRoot);
    if (root.has_value() && *root >= 1) step = reader.IntStat(e, xspace::kStatStepNum);
    if (!step.has_value()) step = matcher.Match(reader.EventName(e));
    if (!step.has_value() || *step < 0) return;
    const int64_t start = xspace::EventStartNs(base, line, e);
    const int64_t end = xspace::EventEndNs(base, line, e);
    const bool cut = reader.IntStat(e, xspace::kStatStepCut).value_or(0) != 0;
    auto [it, inserted] = by_num.try_emplace(*step, StepSpan{*step, start, end, cut});
    if (!inserted) {
      it->second.start_ns = std::min(it->second.start_ns, start);
      it->second.end_ns = std::max(it->second.end_ns, end);
      it->second.cut = it->second.cut || cut;
    }
  });
  std::vector<StepSpan> steps;
  steps.reserve(by_num.size());
  for (auto& [num, span] : by_num) steps.push_back(span);
  std::sort(steps.begin(), steps.end(),
            [](const StepSpan& a, const StepSpan& b) { return a.start_ns < b.start_ns; });
  return steps;
}

// The step containing t (the latest-starting one), or nullopt.
std::optional<int64_t> StepAt(const std::vector<StepSpan>& steps, int64_t t) {
  auto it = std::upper_bound(steps.begin(), steps.end(), t,
                             [](int64_t v, const StepSpan& s) { return v < s.start_ns; });
  // Markers of one step on several threads are one span, so steps barely overlap: a few
  // earlier spans are enough to look at.
  for (int looked = 0; it != steps.begin() && looked < 4; ++looked) {
    --it;
    if (it->end_ns >= t) return it->step;
  }
  return std::nullopt;
}

// Counts collectives per (step, kind) along one line and gives each its identity.
class Numberer {
 public:
  explicit Numberer(const std::vector<StepSpan>& steps) : steps_(steps) {
    for (const StepSpan& x : steps_) {
      last_end_ns_ = std::max(last_end_ns_, x.end_ns);
      next_step_ = std::max(next_step_, x.step + 1);
    }
  }
  std::optional<CollectiveId> Next(CollectiveKind kind, int64_t t) {
    int64_t step = -1;
    if (!steps_.empty()) {
      std::optional<int64_t> s = StepAt(steps_, t);
      // After every step ended: the step after the last, which had not ended when the window
      // did (a recorder that keeps finished steps only, as the cupti light level, has no marker
      // of the step a rank hangs in; a capture's markers run to the window's end, cut).
      if (!s.has_value() && t > last_end_ns_ && !steps_.back().cut) s = next_step_;
      if (!s.has_value()) return std::nullopt;
      step = *s;
    }
    int64_t& n = counts_[{step, kind}];
    return CollectiveId{step, kind, ++n};
  }

 private:
  const std::vector<StepSpan>& steps_;
  // Of every step: the latest end, and the number after the highest.
  int64_t last_end_ns_ = std::numeric_limits<int64_t>::min();
  int64_t next_step_ = 0;
  std::map<std::pair<int64_t, CollectiveKind>, int64_t> counts_;
};

struct TimedEvent {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  const XEvent* event = nullptr;
};

std::vector<TimedEvent> SortedEvents(const XLine& line, int64_t base) {
  std::vector<TimedEvent> out;
  out.reserve(static_cast<size_t>(line.events_size()));
  for (const XEvent& e : line.events()) {
    out.push_back({xspace::EventStartNs(base, line, e), xspace::EventEndNs(base, line, e), &e});
  }
  std::stable_sort(out.begin(), out.end(), [](const TimedEvent& a, const TimedEvent& b) {
    return a.start_ns < b.start_ns;
  });
  return out;
}

// Keeps one time per collective: the earliest (entries) or the latest (completions).
void Keep(std::map<CollectiveId, int64_t>& m, const CollectiveId& id, int64_t t, bool earliest) {
  auto [it, inserted] = m.try_emplace(id, t);
  if (!inserted) it->second = earliest ? std::min(it->second, t) : std::max(it->second, t);
}

std::vector<CollectiveAt> ByTime(const std::map<CollectiveId, int64_t>& m) {
  std::vector<CollectiveAt> out;
  out.reserve(m.size());
  for (const auto& [id, t] : m) out.push_back({id, t});
  std::stable_sort(out.begin(), out.end(), [](const CollectiveAt& a, const CollectiveAt& b) {
    return a.time_ns < b.time_ns;
  });
  return out;
}

int64_t Median(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  const size_t mid = (v.size() - 1) / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(mid), v.end());
  return v[mid];
}

RankCollectives ReadRankCollectives(const XSpace& space, const StepMatcher& matcher) {
  RankCollectives out;
  const int64_t base = xspace::ProfileStartNs(space);
  const XPlane* host = xspace::FindPlane(space, xspace::kHostPlaneName);
  std::vector<StepSpan> steps;
  if (host != nullptr) steps = ReadSteps(*host, base, matcher);
  out.has_step_markers = !steps.empty();
  std::vector<int64_t> durations;
  for (const StepSpan& s : steps) {
    if (s.cut) continue;
    durations.push_back(s.end_ns - s.start_ns);
    out.last_step_end_ns = std::max(out.last_step_end_ns, s.end_ns);
  }
  out.complete_steps = static_cast<int64_t>(durations.size());
  out.median_step_ns = Median(std::move(durations));

  int64_t last_end = 0;
  int64_t device_events = 0;
  // Device planes first: the collective kernels' correlation ids tell which launches are
  // collectives.
  struct Kernel {
    int64_t start_ns, end_ns;
    CollectiveKind kind;
    std::optional<int64_t> corr;
  };
  std::vector<std::vector<Kernel>> devices;
  absl::flat_hash_map<int64_t, CollectiveKind> kernel_corr;
  for (const XPlane& plane : space.planes()) {
    const bool device = IsDevicePlane(plane.name());
    if (!device && plane.name() != xspace::kHostPlaneName) continue;
    const xspace::XPlaneReader reader(plane);
    std::vector<Kernel>* kernels = device ? &devices.emplace_back() : nullptr;
    for (const XLine& line : plane.lines()) {
      const bool derived = xspace::IsDerivedLine(line.name());
      for (const XEvent& e : line.events()) {
        const int64_t end = xspace::EventEndNs(base, line, e);
        last_end = std::max(last_end, end);
        if (!device || derived) continue;
        ++device_events;
        const absl::string_view name = reader.EventName(e);
        if (!IsCollectiveDeviceOpName(name)) continue;
        const std::optional<CollectiveKind> kind = CollectiveKindOfName(name);
        if (!kind.has_value()) continue;
        const std::optional<int64_t> corr = reader.IntStat(e, xspace::kStatCorrelationId);
        kernels->push_back({xspace::EventStartNs(base, line, e), end, *kind, corr});
        if (corr.has_value()) kernel_corr[*corr] = *kind;
      }
    }
  }
  out.window_start_ns = base;
  out.window_end_ns = xspace::ProfileStopNs(space).value_or(last_end);

  std::map<CollectiveId, int64_t> entered;
  absl::flat_hash_map<int64_t, CollectiveId> entry_corr;
  if (host != nullptr) {
    const xspace::XPlaneReader reader(*host);
    for (const XLine& line : host->lines()) {
      Numberer numberer(steps);
      int64_t nccl_end = std::numeric_limits<int64_t>::min();
      std::optional<CollectiveId> nccl_id;
      for (const TimedEvent& t : SortedEvents(line, base)) {
        const absl::string_view name = reader.EventName(*t.event);
        const std::optional<int64_t> corr = reader.IntStat(*t.event, xspace::kStatCorrelationId);
        std::optional<CollectiveKind> kind;
        bool api = false;
        if (IsNcclApiName(name)) {
          if (std::optional<std::string> kernel = reader.StrStat(*t.event, "kernel_name")) {
            kind = CollectiveKindOfName(*kernel);
          }
          if (!kind.has_value()) kind = CollectiveKindOfName(name);
          api = kind.has_value();
        } else if (corr.has_value() && ClassifyHostOpName(name) == OpKind::kHostLaunch) {
          if (t.start_ns < nccl_end) {  // inside an NCCL call: that call is the entry
            if (nccl_id.has_value()) entry_corr[*corr] = *nccl_id;
            continue;
          }
          if (auto it = kernel_corr.find(*corr); it != kernel_corr.end()) kind = it->second;
        }
        if (!kind.has_value()) continue;
        const std::optional<CollectiveId> id = numberer.Next(*kind, t.start_ns);
        if (api) {
          nccl_end = std::max(nccl_end, t.end_ns);
          nccl_id = id;
        }
        if (!id.has_value()) continue;
        Keep(entered, *id, t.start_ns, /*earliest=*/true);
        if (corr.has_value()) entry_corr[*corr] = *id;
      }
    }
  }

  std::map<CollectiveId, int64_t> completed;
  for (std::vector<Kernel>& kernels : devices) {
    std::stable_sort(kernels.begin(), kernels.end(),
                     [](const Kernel& a, const Kernel& b) { return a.start_ns < b.start_ns; });
    Numberer numberer(steps);
    for (const Kernel& k : kernels) {
      std::optional<CollectiveId> id;
      if (k.corr.has_value()) {
        if (auto it = entry_corr.find(*k.corr); it != entry_corr.end()) id = it->second;
      }
      if (!id.has_value()) id = numberer.Next(k.kind, k.start_ns);
      if (!id.has_value()) continue;
      Keep(completed, *id, k.end_ns, /*earliest=*/false);
      // A completion says it was entered, launch recorded or not (the window began after it).
      Keep(entered, *id, k.start_ns, /*earliest=*/true);
    }
  }
  // A trace with launches and no device activity at all (the cupti light level keeps NCCL
  // launches, never kernels): a collective entered in a step that ended counts as completed at
  // that step's end (the rank went on past it); one entered in the step running at the window's
  // end stays open. A host's step end does not wait for its GPU, so this is when the rank went
  // on, not when the kernel ended.
  if (device_events == 0 && completed.empty() && !steps.empty()) {
    absl::flat_hash_map<int64_t, const StepSpan*> by_num;
    for (const StepSpan& st : steps) by_num[st.step] = &st;
    for (const auto& [id, t] : entered) {
      auto it = by_num.find(id.step);
      if (it != by_num.end() && !it->second->cut && it->second->end_ns >= t) {
        Keep(completed, id, it->second->end_ns, /*earliest=*/false);
      }
    }
    out.completions_from_steps = !completed.empty();
  }
  out.entered = ByTime(entered);
  out.completed = ByTime(completed);
  return out;
}

int64_t CountSteps(const XSpace& space) {
  const XPlane* host = xspace::FindPlane(space, xspace::kHostPlaneName);
  if (host == nullptr) return 0;
  const xspace::XPlaneReader reader(*host);
  absl::flat_hash_set<int64_t> steps;
  reader.ForEachEvent([&](const XLine&, const XEvent& e) {
    if (reader.IntStat(e, xspace::kStatIsRoot).value_or(0) != 1) return;
    if (std::optional<int64_t> num = reader.IntStat(e, xspace::kStatStepNum)) steps.insert(*num);
  });
  return static_cast<int64_t>(steps.size());
}

}  // namespace reference

// --- generated traces --------------------------------------------------------------------------

constexpr int64_t kStart = 1'795'000'000'000'000'000;  // ns since the epoch
using ::profctl::test_time::kMs;

// A random host trace mixing what the rules tell apart: step roots (with and without step_num,
// cut), named step markers, NCCL calls that name a collective or not (with and without a
// kernel_name stat), launches inside and outside them, collective kernels with and without
// correlation ids, clipped at the window's end or not, other kernels, derived device lines,
// several host planes, device planes before or after the host's, a bad device ordinal, a plane
// that is neither.
XSpace RandomTrace(uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto pick = [&](int64_t n) {
    return static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
  };
  const auto chance = [&](int percent) { return pick(100) < percent; };
  const int64_t window = (50 + pick(200)) * kMs;
  XSpace space;
  if (chance(85)) {
    xspace::SetProfileWindow(&space, kStart, kStart + window);
  } else if (chance(50)) {  // a start and no stop
    xspace::SetProfileWindow(&space, kStart, kStart + window);
    XPlane* env = space.mutable_planes(0);
    for (auto& [id, md] : *env->mutable_stat_metadata()) {
      if (md.name() == xspace::kStatProfileStop) md.set_name("not_the_stop");
    }
  }
  const int64_t base = space.planes_size() > 0 ? kStart : 0;

  const std::vector<std::string> kernels = {"ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
                                            "ncclDevKernel_AllGather_RING_LL",
                                            "ncclKernel_SendRecv",
                                            "all-reduce.3",
                                            "all-reduce-start.1",
                                            "fusion.12",
                                            "volta_sgemm_128x64_nn",
                                            "ncclDevKernel_Broadcast_RING_LL",
                                            "rcclReduceScatter"};
  const std::vector<std::string> calls = {
      "ncclAllReduce",         "ncclGroupStart",   "ncclAllGather",  "ncclSend",
      "rcclBroadcast",         "cudaLaunchKernel", "cuLaunchKernel", "cudaMemcpyAsync",
      "cudaStreamSynchronize", "aten::matmul",     "ProfilerStep#7", "train_step 12",
      "$python_frame"};

  std::vector<int64_t> kernel_corrs;
  const int devices = static_cast<int>(pick(4));
  std::vector<XPlane> device_planes(static_cast<size_t>(devices));
  int64_t next_corr = 1;
  for (int d = 0; d < devices; ++d) {
    const absl::string_view prefix = d == 2 ? xspace::kTpuPlanePrefix : xspace::kGpuPlanePrefix;
    const std::string name =
        d == 1 && chance(30) ? absl::StrCat(prefix, "x") : absl::StrCat(prefix, d);
    xspace::XPlaneBuilder gpu(&device_planes[static_cast<size_t>(d)], 10 + d, name, base);
    const int64_t corr = gpu.StatMetadataId(xspace::kStatCorrelationId);
    const int64_t cut = gpu.StatMetadataId(xspace::kStatStepCut);
    const int lines = 1 + static_cast<int>(pick(3));
    for (int l = 0; l < lines; ++l) {
      const bool derived = l == 2;
      XLine* line = gpu.AddLine(
          l,
          derived ? (chance(50) ? "Steps" : "XLA Ops") : absl::StrCat("Stream #", l, "(Compute)"),
          kStart);
      const int n = static_cast<int>(pick(40));
      for (int i = 0; i < n; ++i) {
        const std::string& k =
            kernels[static_cast<size_t>(pick(static_cast<int64_t>(kernels.size())))];
        const int64_t start = kStart + pick(window);
        const int64_t dur = pick(5 * kMs);
        XEvent* e = gpu.AddEvent(line, gpu.EventMetadataId(k), start, dur);
        if (chance(80)) {
          const int64_t id = chance(10) ? 1 + pick(next_corr + 3) : next_corr++;
          if (chance(50)) {
            gpu.AddStat(e, corr, static_cast<uint64_t>(id));
          } else {
            gpu.AddStat(e, corr, id);
          }
          kernel_corrs.push_back(id);
        }
        if (chance(10)) gpu.AddStat(e, cut, int64_t{1});
        if (chance(5)) gpu.AddStat(e, gpu.StatMetadataId("other"), int64_t{3});
      }
    }
  }

  const auto add_host = [&](XPlane* plane, int64_t plane_id) {
    xspace::XPlaneBuilder host(plane, plane_id, xspace::kHostPlaneName, base);
    const int64_t is_root = host.StatMetadataId(xspace::kStatIsRoot);
    const int64_t step_num = host.StatMetadataId(xspace::kStatStepNum);
    const int64_t cut = host.StatMetadataId(xspace::kStatStepCut);
    const int64_t corr = host.StatMetadataId(xspace::kStatCorrelationId);
    const int64_t kernel_name = host.StatMetadataId("kernel_name");
    const int lines = 1 + static_cast<int>(pick(3));
    const int64_t step_len = (5 + pick(30)) * kMs;
    for (int l = 0; l < lines; ++l) {
      XLine* line = host.AddLine(100 + l, absl::StrCat("thread ", l), kStart);
      // Step roots across the window, the last one maybe clipped.
      if (chance(80)) {
        const int64_t first = pick(3);
        for (int64_t s = 0; kStart + s * step_len < kStart + window; ++s) {
          const int64_t start = kStart + s * step_len;
          const int64_t end = std::min(start + step_len - pick(kMs), kStart + window);
          XEvent* e = host.AddEvent(line, host.EventMetadataId("train"), start, end - start);
          host.AddStat(e, is_root, chance(90) ? int64_t{1} : int64_t{2});
          if (chance(95)) host.AddStat(e, step_num, first + s);
          if (end == kStart + window || chance(3)) host.AddStat(e, cut, int64_t{1});
        }
      }
      const int n = static_cast<int>(pick(60));
      for (int i = 0; i < n; ++i) {
        const std::string& c = calls[static_cast<size_t>(pick(static_cast<int64_t>(calls.size())))];
        const int64_t start = kStart + pick(window);
        const int64_t dur = pick(3 * kMs);
        XEvent* e = host.AddEvent(line, host.EventMetadataId(c), start, dur);
        if (chance(70)) {
          const int64_t id = !kernel_corrs.empty() && chance(60)
                                 ? kernel_corrs[static_cast<size_t>(
                                       pick(static_cast<int64_t>(kernel_corrs.size())))]
                                 : 1000 + pick(50);
          host.AddStat(e, corr, static_cast<uint64_t>(id));
        }
        if (absl::StartsWith(c, "nccl") && chance(30)) {
          host.AddStat(e, kernel_name,
                       chance(50) ? absl::string_view("ncclDevKernel_ReduceScatter_LL")
                                  : absl::string_view("ncclGroupKernel"));
        }
        if (c == "ncclAllReduce" && chance(50)) {  // a launch inside the call
          XEvent* in =
              host.AddEvent(line, host.EventMetadataId("cudaLaunchKernel"), start, dur / 2);
          if (!kernel_corrs.empty()) {
            host.AddStat(in, corr,
                         static_cast<uint64_t>(kernel_corrs[static_cast<size_t>(
                             pick(static_cast<int64_t>(kernel_corrs.size())))]));
          }
        }
      }
    }
  };
  std::vector<XPlane> host_planes(chance(90) ? (chance(10) ? 2 : 1) : 0);
  for (size_t h = 0; h < host_planes.size(); ++h)
    add_host(&host_planes[h], 1 + static_cast<int64_t>(h));
  XPlane other;
  if (chance(30)) xspace::XPlaneBuilder(&other, 50, "/host:metadata", base);

  // The planes in a random order after the Task Environment's.
  std::vector<XPlane*> order;
  for (XPlane& p : device_planes) order.push_back(&p);
  for (XPlane& p : host_planes) order.push_back(&p);
  if (!other.name().empty()) order.push_back(&other);
  std::shuffle(order.begin(), order.end(), rng);
  for (XPlane* p : order) *space.add_planes() = *p;
  return space;
}

std::string Describe(const RankCollectives& r) {
  std::string out = absl::StrCat("steps ", r.complete_steps, " median ", r.median_step_ns, " last ",
                                 r.last_step_end_ns, " markers ", r.has_step_markers,
                                 " from_steps ", r.completions_from_steps, " window ",
                                 r.window_start_ns, "..", r.window_end_ns, "\n");
  for (const auto* list : {&r.entered, &r.completed}) {
    absl::StrAppend(&out, list == &r.entered ? "entered:" : "completed:");
    for (const CollectiveAt& c : *list) {
      absl::StrAppend(&out, " [", FormatCollectiveId(c.id), " @", c.time_ns, "]");
    }
    absl::StrAppend(&out, "\n");
  }
  return out;
}

const StepMatcher& Matcher() {
  static const auto* const m = new StepMatcher(*StepMatcher::Create(kDefaultStepPattern));
  return *m;
}

// Everything the one pass gives against the reference, on one trace; returns what it gave.
HostDecode ExpectSameAsReference(const XSpace& space, const std::string& what) {
  const std::string bytes = space.SerializeAsString();
  absl::StatusOr<HostDecode> d = DecodeXSpaceHost(
      StringByteSource(bytes), "h", 0, Matcher(),
      {.breakdown = true, .collectives = true, .collective_ends = true, .counts = true});
  EXPECT_THAT(d, IsOk()) << what;
  if (!d.ok()) return {};
  EXPECT_EQ(Describe(d->collectives), Describe(reference::ReadRankCollectives(space, Matcher())))
      << what;
  EXPECT_EQ(d->collective_ends, CollectiveEndsNs(space)) << what;
  EXPECT_EQ(d->events, xspace::CountEvents(space)) << what;
  EXPECT_EQ(d->steps, reference::CountSteps(space)) << what;

  // The breakdown's input is what ReadXSpaceHost alone reads.
  absl::StatusOr<HostTrace> alone = ReadXSpaceHost(StringByteSource(bytes), "h", 0, Matcher());
  EXPECT_EQ(alone.ok(), d->trace.ok()) << what;
  if (!alone.ok() || !d->trace.ok()) {
    EXPECT_EQ(alone.status(), d->trace.status()) << what;
    return *std::move(d);
  }
  EXPECT_EQ(d->trace->host_ops.size(), alone->host_ops.size()) << what;
  EXPECT_EQ(d->trace->steps.size(), alone->steps.size()) << what;
  EXPECT_EQ(d->trace->devices.size(), alone->devices.size()) << what;
  EXPECT_EQ(d->trace->warnings, alone->warnings) << what;
  EXPECT_EQ(d->trace->window_start_ns, alone->window_start_ns) << what;
  EXPECT_EQ(d->trace->window_end_ns, alone->window_end_ns) << what;
  return *std::move(d);
}

TEST(DecodeXSpaceHostTest, RandomTracesGiveWhatTheDecodedReadersGave) {
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    ExpectSameAsReference(RandomTrace(seed), absl::StrCat("seed ", seed));
    if (HasFailure()) break;
  }
}

TEST(DecodeXSpaceHostTest, SyntheticJobsHealthyAndHungGiveWhatTheDecodedReadersGave) {
  for (int64_t rank = 0; rank < 4; ++rank) {
    synthetic::SyntheticJobConfig config;
    config.rank = rank;
    config.world = 4;
    config.gpus = 2;
    config.kernels_per_step = 6;
    config.step_ms = 20;
    config.seed = 7 + rank;
    if (rank >= 2) {  // the last two: a job whose rank 1 hangs mid-window
      config.hang_at_step = synthetic::SyntheticJob(config).StepIndexAt(kStart + 100 * kMs);
      config.hang_rank = 1;
    }
    config.clock_skew_ns = rank * 1'234'567;
    const synthetic::SyntheticJob job(config);
    XSpace space;
    job.Generate(kStart + 3 * kMs, kStart + 203 * kMs, &space);
    const HostDecode d = ExpectSameAsReference(space, absl::StrCat("synthetic rank ", rank));
    EXPECT_THAT(d.collectives.entered, Not(IsEmpty()));
    EXPECT_THAT(d.collectives.completed, Not(IsEmpty()));
    EXPECT_THAT(d.collective_ends, Not(IsEmpty()));
    EXPECT_GT(d.steps, 0);
  }
}

TEST(DecodeXSpaceHostTest, ARealCaptureGivesWhatTheDecodedReadersGave) {
  absl::StatusOr<std::string> bytes = ReadFile(DataPath("h100_pytorch_steps.xplane.pb"));
  ASSERT_THAT(bytes, IsOk());
  XSpace space;
  ASSERT_TRUE(space.ParseFromString(*bytes));
  const HostDecode d = ExpectSameAsReference(space, "h100_pytorch_steps.xplane.pb");
  EXPECT_GT(d.events, 0);
  EXPECT_GT(d.steps, 0);
}

TEST(DecodeXSpaceHostTest, ARealJaxTraceGivesWhatTheDecodedReadersGave) {
  absl::StatusOr<std::string> bytes = ReadFile(DataPath("h200_jax_steps.xplane.pb"));
  ASSERT_THAT(bytes, IsOk());
  XSpace space;
  ASSERT_TRUE(space.ParseFromString(*bytes));
  const HostDecode d = ExpectSameAsReference(space, "h200_jax_steps.xplane.pb");
  EXPECT_GT(d.events, 0);
  EXPECT_GE(d.steps, 67);
}

// The device planes are read first, wherever they are in the file: a host plane written before
// them keeps only the launches of collective kernels, and the record is the same either way.
TEST(DecodeXSpaceHostTest, HostPlaneBeforeOrAfterTheDevicesGivesOneRecord) {
  XSpace host_first = RandomTrace(11);
  std::stable_sort(host_first.mutable_planes()->begin(), host_first.mutable_planes()->end(),
                   [](const XPlane& a, const XPlane& b) {
                     return (a.name() == xspace::kHostPlaneName) >
                            (b.name() == xspace::kHostPlaneName);
                   });
  XSpace devices_first = host_first;
  std::stable_sort(devices_first.mutable_planes()->begin(), devices_first.mutable_planes()->end(),
                   [](const XPlane& a, const XPlane& b) {
                     return (a.name() == xspace::kHostPlaneName) <
                            (b.name() == xspace::kHostPlaneName);
                   });
  const auto record = [](const XSpace& s) {
    const std::string bytes = s.SerializeAsString();
    absl::StatusOr<HostDecode> d = DecodeXSpaceHost(StringByteSource(bytes), "h", 0, Matcher(),
                                                    {.breakdown = false, .collectives = true});
    return d.ok() ? Describe(d->collectives) : d.status().ToString();
  };
  const std::string a = record(host_first);
  EXPECT_THAT(a, ::testing::HasSubstr("entered: ["));
  EXPECT_EQ(a, record(devices_first));
}

}  // namespace
}  // namespace profctl::analysis

// The Kineto reader of the tools' trace (tool_readers.h): a PyTorch profiler document's events,
// environment and memory records, by the breakdown's rules, with exact decimal microseconds.
#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "analysis/alignment.h"
#include "analysis/tools/tool_readers_internal.h"
#include "rapidjson/document.h"
#include "rapidjson/error/en.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"

namespace profctl::analysis::tool_readers_internal {

namespace {

// `text` (a JSON number) times 10^scale, rounded half away from zero, exactly (no double).
bool ScaledDecimal(absl::string_view text, int scale, int64_t* out) {
  bool negative = false;
  if (absl::ConsumePrefix(&text, "-")) negative = true;
  __int128 v = 0;
  int digits = 0;
  int exp10 = scale;
  size_t i = 0;
  bool any = false;
  const auto digit = [&](char c) {
    any = true;
    if (digits < 36) {
      v = v * 10 + (c - '0');
      if (v != 0) ++digits;
      return true;
    }
    return false;
  };
  for (; i < text.size() && absl::ascii_isdigit(static_cast<unsigned char>(text[i])); ++i) {
    if (!digit(text[i])) ++exp10;
  }
  if (i < text.size() && text[i] == '.') {
    for (++i; i < text.size() && absl::ascii_isdigit(static_cast<unsigned char>(text[i])); ++i) {
      if (digit(text[i])) --exp10;
    }
  }
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    int e = 0;
    if (!absl::SimpleAtoi(text.substr(i + 1), &e) || e > 40 || e < -80) return false;
    exp10 += e;
    i = text.size();
  }
  if (!any || i != text.size()) return false;
  for (; exp10 > 0; --exp10) {
    v *= 10;
    if (v > kInt64Max) return false;
  }
  if (exp10 < 0) {
    if (exp10 < -37) {
      v = 0;
    } else {
      __int128 div = 1;
      for (; exp10 < 0; ++exp10) div *= 10;
      const __int128 rest = v % div;
      v /= div;
      if (2 * rest >= div) ++v;
    }
  }
  if (v > kInt64Max) return false;
  *out = negative ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
  return true;
}

using JsonValue = rapidjson::Value;

const JsonValue* Member(const JsonValue& obj, const char* key) {
  if (!obj.IsObject()) return nullptr;
  auto it = obj.FindMember(key);
  return it == obj.MemberEnd() ? nullptr : &it->value;
}
// Numbers are parsed as strings (kParseNumbersAsStringsFlag): both read as text.
absl::string_view Text(const JsonValue* v) {
  if (v == nullptr || !v->IsString()) return {};
  return absl::string_view(v->GetString(), v->GetStringLength());
}
std::optional<int64_t> IntOf(const JsonValue* v) {
  int64_t x = 0;
  if (v != nullptr && v->IsString() && ScaledDecimal(Text(v), 0, &x)) return x;
  return std::nullopt;
}
std::optional<double> DoubleOf(const JsonValue* v) {
  double x = 0;
  if (v != nullptr && v->IsString() && absl::SimpleAtod(Text(v), &x)) return x;
  return std::nullopt;
}
std::string Serialize(const JsonValue* v) {
  if (v == nullptr || v->IsNull()) return {};
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  v->Accept(writer);
  return std::string(buffer.GetString(), buffer.GetSize());
}
std::array<int32_t, 3> Dims(const JsonValue* v) {
  std::array<int32_t, 3> d = {0, 0, 0};
  if (v == nullptr || !v->IsArray()) return d;
  for (rapidjson::SizeType i = 0; i < v->Size() && i < 3; ++i) {
    d[i] = static_cast<int32_t>(IntOf(&(*v)[i]).value_or(0));
  }
  return d;
}

enum class KCat : uint8_t {
  kKernel,
  kMemcpy,
  kMemset,
  kOp,
  kAnnotation,
  kRuntime,
  kPython,
  kOther
};

// Categories of complete events that carry nothing the tools place, by design: flow and
// bookkeeping events, and device-side copies of host annotations.
bool IsKnownIgnoredCategory(absl::string_view cat) {
  static constexpr absl::string_view kIgnored[] = {
      "gpu_user_annotation", "cuda_sync", "trace",  "overhead",
      "cpu_instant_event",   "ac2g",      "fwdbwd", "cuda_profiler_range",
      "external_correlation"};
  for (const absl::string_view c : kIgnored) {
    if (absl::EqualsIgnoreCase(cat, c)) return true;
  }
  return false;
}

KCat KinetoCat(absl::string_view cat) {
  struct Entry {
    absl::string_view name;
    KCat cat;
  };
  static constexpr Entry kCats[] = {
      {"kernel", KCat::kKernel},        {"gpu_memcpy", KCat::kMemcpy},
      {"memcpy", KCat::kMemcpy},        {"gpu_memset", KCat::kMemset},
      {"memset", KCat::kMemset},        {"cpu_op", KCat::kOp},
      {"operator", KCat::kOp},          {"user_annotation", KCat::kAnnotation},
      {"cuda_runtime", KCat::kRuntime}, {"cuda_driver", KCat::kRuntime},
      {"runtime", KCat::kRuntime},      {"python_function", KCat::kPython},
  };
  for (const Entry& e : kCats) {
    if (absl::EqualsIgnoreCase(cat, e.name)) return e.cat;
  }
  if (absl::EndsWithIgnoreCase(cat, "_runtime") || absl::EndsWithIgnoreCase(cat, "_driver")) {
    return KCat::kRuntime;
  }
  return KCat::kOther;
}

// PyTorch records an allocation inside the op that made it: the op of each memory event is the
// innermost op (cpu_op or user annotation) on its thread that contains its time. Ops per thread
// sorted by start; from the last op starting at or before the time, walk back (at most
// kMaxWalk ops) to the first that still contains it: any containing op that starts later would
// have been met first, so it is the innermost.
void LinkMemoryToOps(const std::vector<int64_t>& threads, ToolTrace* out) {
  constexpr int kMaxWalk = 256;
  absl::flat_hash_map<int64_t, std::vector<const HostEvent*>> ops;
  for (const HostEvent& h : out->host_events) {
    if (h.role == HostEventRole::kFrameworkOp || h.role == HostEventRole::kAnnotation) {
      ops[h.thread].push_back(&h);
    }
  }
  for (auto& [thread, list] : ops) {
    std::sort(list.begin(), list.end(), [](const HostEvent* a, const HostEvent* b) {
      return std::tie(a->start_ns, b->end_ns) < std::tie(b->start_ns, a->end_ns);
    });
  }
  for (size_t i = 0; i < out->memory.size() && i < threads.size(); ++i) {
    MemoryEvent& m = out->memory[i];
    auto it = ops.find(threads[i]);
    if (it == ops.end()) continue;
    const std::vector<const HostEvent*>& list = it->second;
    auto at = std::upper_bound(list.begin(), list.end(), m.time_ns,
                               [](int64_t t, const HostEvent* h) { return t < h->start_ns; });
    for (int walked = 0; at != list.begin() && walked < kMaxWalk; ++walked) {
      --at;
      if ((*at)->end_ns > m.time_ns) {
        m.op = (*at)->name;
        break;
      }
    }
  }
}

// The run's environment from the document's top-level members (PyTorch's profiler writes the
// rank, CUDA versions and devices there); the rank names the host.
void ReadKinetoEnvironment(const JsonValue& doc, ToolTrace* out) {
  const JsonValue* dist = Member(doc, "distributedInfo");
  const JsonValue* rank = dist == nullptr ? nullptr : Member(*dist, "rank");
  int64_t r = -1;
  if (rank != nullptr && rank->IsString() && absl::SimpleAtoi(Text(rank), &r) && r >= 0) {
    out->host = absl::StrCat("rank-", r);
  }
  RunEnvironment& env = out->environment;
  env.framework = "PyTorch";
  env.hostnames.push_back(out->host);
  if (const JsonValue* v = Member(doc, "cuda_runtime_version"))
    env.cuda_version = std::string(Text(v));
  if (const JsonValue* v = Member(doc, "cuda_driver_version"))
    env.driver_version = std::string(Text(v));
  if (const JsonValue* props = Member(doc, "deviceProperties"); props && props->IsArray()) {
    for (const JsonValue& p : props->GetArray()) {
      DeviceInfo d;
      d.id = IntOf(Member(p, "id")).value_or(0);
      d.name = std::string(Text(Member(p, "name")));
      d.compute_major = static_cast<int32_t>(IntOf(Member(p, "computeMajor")).value_or(0));
      d.compute_minor = static_cast<int32_t>(IntOf(Member(p, "computeMinor")).value_or(0));
      d.memory_bytes = IntOf(Member(p, "totalGlobalMem")).value_or(0);
      env.devices.push_back(std::move(d));
    }
  }
}

// Turns a Kineto document's events into one ToolTrace: Add each event of traceEvents in order,
// then Finish. Times move by `shift` (the document's base time less the host's offset).
class KinetoEventReader {
 public:
  KinetoEventReader(ToolTrace* out, __int128 shift, const StepMatcher& matcher)
      : out_(out), shift_(shift), matcher_(matcher) {}

  // Event number `index` of traceEvents.
  void Add(const JsonValue& e, int64_t index) {
    const absl::string_view ph = Text(Member(e, "ph"));
    const absl::string_view name = Text(Member(e, "name"));
    if (ph == "i" || ph == "I") {
      if (name == "[memory]") AddMemory(e);
      return;
    }
    if (ph == "X") AddComplete(e, name, index);
  }

  void Finish() && {
    if (min_start_ <= max_end_) {
      out_->window_start_ns = min_start_;
      out_->window_end_ns = max_end_;
    }
    // Devices that ran kernels but that deviceProperties lacks are added by the overview
    // (overview.cc, AddUndescribedDevices), for every source alike.
    LinkMemoryToOps(memory_threads_, out_);
    out_->warnings = std::move(warnings_).Finish();
    // Every class of event the tools cannot place, named with its count: its time is in no
    // tool (device events of an accelerator profctl does not read, e.g. MTIA's, count as idle).
    for (const auto& [cat, count] : unplaced_) {
      out_->warnings.push_back(absl::StrCat(
          count, " complete events of category '", cat.empty() ? "(none)" : cat, "' not placed: ",
          absl::StrContains(cat, "mtia") || absl::StrContains(cat, "ccp")
              ? "device events of an accelerator profctl does not read (its device time shows as "
                "idle)"
              : "not a category profctl reads (kernel, gpu_memcpy, gpu_memset, cpu_op, "
                "user_annotation, *_runtime, *_driver, python_function)"));
    }
  }

 private:
  // `t` moved by the shift into *out_t; false when that leaves the range of times.
  bool Move(int64_t t, int64_t* out_t) const {
    const __int128 v = t + shift_;
    if (v < -kMaxAbsTimeNs || v > kMaxAbsTimeNs) return false;
    *out_t = static_cast<int64_t>(v);
    return true;
  }

  // An instant "[memory]" event: an allocation (bytes > 0) or a free.
  void AddMemory(const JsonValue& e) {
    int64_t ts = 0;
    const JsonValue* args = Member(e, "args");
    if (args == nullptr || !ScaledDecimal(Text(Member(e, "ts")), 3, &ts)) return;
    MemoryEvent m;
    if (!Move(ts, &m.time_ns)) return;
    const int64_t type = IntOf(Member(*args, "Device Type")).value_or(-1);
    m.device = type == 1 ? IntOf(Member(*args, "Device Id")).value_or(0) : -1;
    m.bytes = IntOf(Member(*args, "Bytes")).value_or(0);
    m.address = static_cast<uint64_t>(IntOf(Member(*args, "Addr")).value_or(0));
    m.reported_in_use = IntOf(Member(*args, "Total Allocated")).value_or(-1);
    m.reported_reserved = IntOf(Member(*args, "Total Reserved")).value_or(-1);
    memory_threads_.push_back(IntOf(Member(e, "tid")).value_or(0));
    out_->memory.push_back(m);
  }

  // A complete ("X") event: a device event or a host one, by its category.
  void AddComplete(const JsonValue& e, absl::string_view name, int64_t index) {
    int64_t ts = 0;
    int64_t dur = 0;
    if (!ScaledDecimal(Text(Member(e, "ts")), 3, &ts) ||
        !ScaledDecimal(Text(Member(e, "dur")), 3, &dur) || dur < 0 || ts < -kMaxAbsTimeNs ||
        ts > kMaxAbsTimeNs || dur > kMaxAbsTimeNs) {
      warnings_.Note("complete events without a valid \"ts\"/\"dur\" dropped",
                     [&] { return absl::StrCat("event #", index, " '", name, "'"); });
      return;
    }
    int64_t start = 0;
    int64_t end = 0;
    if (!Move(ts, &start) || !Move(ts + dur, &end)) {
      warnings_.Note("events out of range once moved by base time and offset dropped",
                     [&] { return absl::StrCat("event #", index); });
      return;
    }
    const absl::string_view cat_name = Text(Member(e, "cat"));
    const KCat cat = KinetoCat(cat_name);
    const JsonValue* args = Member(e, "args");
    static const JsonValue kNull;
    const JsonValue& a = args != nullptr ? *args : kNull;
    min_start_ = std::min(min_start_, start);
    max_end_ = std::max(max_end_, end);
    switch (cat) {
      case KCat::kKernel:
      case KCat::kMemcpy:
      case KCat::kMemset:
        AddDeviceEvent(e, a, cat, name, index, start, end);
        break;
      case KCat::kOp:
      case KCat::kAnnotation:
      case KCat::kRuntime:
      case KCat::kPython:
        AddHostEvent(e, a, cat, name, start, end);
        break;
      case KCat::kOther:
        if (!IsKnownIgnoredCategory(cat_name)) ++unplaced_[std::string(cat_name)];
        break;
    }
  }

  // A kernel, memcpy or memset on the device of args.device (else the integer pid).
  void AddDeviceEvent(const JsonValue& e, const JsonValue& a, KCat cat, absl::string_view name,
                      int64_t index, int64_t start, int64_t end) {
    std::optional<int64_t> device = IntOf(Member(a, "device"));
    if (!device) device = IntOf(Member(e, "pid"));
    if (!device) {
      warnings_.Note("device events without args.device or an integer pid dropped",
                     [&] { return absl::StrCat("event #", index, " '", name, "'"); });
      return;
    }
    DeviceEvent d;
    d.start_ns = start;
    d.end_ns = end;
    d.device = *device;
    d.name = out_->strings.Intern(name);
    d.kind = cat == KCat::kMemset ? OpKind::kDeviceCompute : ClassifyDeviceOpName(name);
    d.is_kernel = cat == KCat::kKernel;
    d.correlation_id = IntOf(Member(a, "correlation")).value_or(-1);
    d.link_id = IntOf(Member(a, "External id")).value_or(-1);
    std::optional<int64_t> stream = IntOf(Member(a, "stream"));
    if (!stream) stream = IntOf(Member(e, "tid"));
    d.stream = static_cast<int32_t>(stream.value_or(0));
    if (d.is_kernel) {
      KernelDetails k;
      k.registers_per_thread =
          static_cast<int32_t>(IntOf(Member(a, "registers per thread")).value_or(-1));
      k.static_shared_bytes = IntOf(Member(a, "shared memory")).value_or(-1);
      k.grid = Dims(Member(a, "grid"));
      k.block = Dims(Member(a, "block"));
      k.occupancy_pct = DoubleOf(Member(a, "est. achieved occupancy %")).value_or(-1.0);
      d.details = static_cast<int32_t>(out_->kernel_details.size());
      out_->kernel_details.push_back(k);
    }
    out_->device_events.push_back(d);
  }

  // An op, annotation, runtime call or Python function (only input waits of the last) on the
  // host; an op or annotation the step matcher matches is a step.
  void AddHostEvent(const JsonValue& e, const JsonValue& a, KCat cat, absl::string_view name,
                    int64_t start, int64_t end) {
    HostEvent h;
    h.start_ns = start;
    h.end_ns = end;
    h.thread = IntOf(Member(e, "tid")).value_or(0);
    h.name = out_->strings.Intern(name);
    h.type = h.name;
    if (cat != KCat::kRuntime && cat != KCat::kPython && matcher_.Match(name)) {
      h.role = HostEventRole::kStep;
      out_->host_events.push_back(h);
      return;
    }
    h.kind = ClassifyHostOpName(name);
    if (cat == KCat::kPython && h.kind != OpKind::kHostInputWait) return;
    h.role = cat == KCat::kOp        ? HostEventRole::kFrameworkOp
             : cat == KCat::kRuntime ? HostEventRole::kRuntime
                                     : HostEventRole::kAnnotation;
    h.compile = h.kind == OpKind::kHostOther && IsCompileName(name);
    h.correlation_id = IntOf(Member(a, "correlation")).value_or(-1);
    h.link_id = IntOf(Member(a, "External id")).value_or(-1);
    if (const JsonValue* dims = Member(a, "Input Dims")) {
      h.input_dims = out_->strings.Intern(Serialize(dims));
    }
    if (const JsonValue* types = Member(a, "Input type")) {
      h.input_types = out_->strings.Intern(Serialize(types));
    }
    out_->host_events.push_back(h);
  }

  ToolTrace* out_;
  const __int128 shift_;
  const StepMatcher& matcher_;
  ReaderWarnings warnings_;
  int64_t min_start_ = kInt64Max;
  int64_t max_end_ = std::numeric_limits<int64_t>::min();
  std::vector<int64_t> memory_threads_;      // the `tid` of each out_->memory event
  std::map<std::string, int64_t> unplaced_;  // complete events per category not placed
};

}  // namespace

absl::StatusOr<ToolTrace> ReadKinetoToolDocument(std::string json, const std::string& default_host,
                                                 int64_t offset_ns, const StepMatcher& matcher) {
  rapidjson::Document doc;
  // In place: the document's strings and numbers point into `json` instead of being copied.
  constexpr unsigned kFlags = rapidjson::kParseInsituFlag | rapidjson::kParseNumbersAsStringsFlag |
                              rapidjson::kParseTrailingCommasFlag;
  doc.ParseInsitu<kFlags>(json.data());
  if (doc.HasParseError()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Kineto trace of ", default_host, ": invalid JSON at offset ",
                     doc.GetErrorOffset(), ": ", rapidjson::GetParseError_En(doc.GetParseError())));
  }
  const JsonValue* events = doc.IsArray() ? &doc : Member(doc, "traceEvents");
  if (events == nullptr || !events->IsArray()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Kineto trace of ", default_host,
                     ": no \"traceEvents\" array: not a PyTorch profiler (Chrome trace) file"));
  }
  ToolTrace out;
  out.host = default_host;
  int64_t base = 0;
  if (doc.IsObject()) {
    (void)ScaledDecimal(Text(Member(doc, "baseTimeNanoseconds")), 0, &base);
    ReadKinetoEnvironment(doc, &out);
  }
  KinetoEventReader reader(&out, static_cast<__int128>(base) - offset_ns, matcher);
  int64_t index = -1;
  for (const JsonValue& e : events->GetArray()) reader.Add(e, ++index);
  std::move(reader).Finish();
  return out;
}

}  // namespace profctl::analysis::tool_readers_internal

// End-to-end speed and memory of `profctl analyze` on a pod-sized input: N hosts (64) of one
// synthetic data-parallel job, about E (1 M) events per host file, against the time and memory it
// takes just to parse the same files (docs/perf.md). Not a Google Benchmark: every sample is a
// whole child process (the release `profctl`, or this program in a child mode), so its wall time,
// CPU time and peak RSS are its own (wait4's rusage: ru_utime + ru_stime, ru_maxrss). The parent
// stays small (it never loads a trace), since a child started with posix_spawn inherits the
// parent's RSS high-water mark at exec. Results and the exact command: docs/perf.md.
//
//   analyze_benchmark [run] [--data=/tmp/profctl_analyze_bench] [--hosts=64] [--events=1000000]
//                     [--gpus=8] [--kernels-per-step=256] [--step-ms=25] [--runs=3]
//                     [--out-run=true] [--phases=true] [--profctl=PATH] [--regenerate]
//     Makes DIR/host<i>.xplane.pb (i = 0..hosts-1) unless DIR already holds exactly that data
//     set (DIR/bench_data.txt, written last, records the knobs and every file's events and
//     bytes), then runs, --runs times each, interleaved:
//       floor       `profctl help`: the binary's own start-up RSS and time;
//       parse-only  this program's `parse-only` mode, 1 thread and 2 threads;
//       analyze     `profctl analyze DIR --json` with stdout to /dev/null, default jobs and
//                   --jobs=1;
//       analyze+out `profctl analyze DIR --out=SCRATCH` (JSON, CSV and report.html written);
//       wire-scan   this program's `wire-scan` mode, 1 and 2 threads (a diagnostic);
//     prints medians (each column on its own) and the three targets of docs/perf.md, met or not;
//     then, with --phases, one run of the `phases` mode.
//   analyze_benchmark generate --data=DIR [knobs as above]   (run does this when needed)
//   analyze_benchmark parse-only DIR [--threads=1]
//     Per file, as AnalyzeTraces does: ReadFile, XSpace::ParseFromString, clear the bytes,
//     xspace::Validate; one file at a time per thread; nothing else.
//   analyze_benchmark wire-scan DIR [--threads=1]
//     The floor of a streaming reader: each file in one read() into a buffer sized by fstat
//     (ReadFile), then a raw protobuf wire-format walk down to every event's and stat's numbers
//     with io::CodedInputStream, no XSpace built and nothing allocated per event.
//   analyze_benchmark phases DIR
//     An instrumented one-thread copy of AnalyzeTraces (coordinator/offline/analyze.cc) plus the
//     JSON and report writers: time per phase summed over hosts, RSS after each phase (max over
//     hosts), the decoded sizes (HostTrace, HostSummary), then BuildPodBreakdown and the writers.
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "analysis/breakdown.h"
#include "analysis/readers/xspace_reader.h"
#include "bench/proc_status.h"
#include "common/byte_source.h"
#include "common/file_util.h"
#include "common/flags.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"
#include "report/breakdown_writers.h"
#include "synthetic/synthetic_job.h"
#include "tensorflow/profiler/xplane.pb.h"
#include "tests/build_paths.h"
#include "xspace/xspace.h"

extern char** environ;

namespace profctl::bench {
namespace {

constexpr char kDataManifest[] = "bench_data.txt";
constexpr absl::string_view kSuffix = ".xplane.pb";
constexpr int64_t kT0 = 1'767'225'600LL * 1'000'000'000;  // 2026-01-01, true time

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double Sec(int64_t ns) { return static_cast<double>(ns) / 1e9; }
double MiB(double bytes) { return bytes / (1024.0 * 1024.0); }

std::string SelfPath() {
  std::error_code ec;
  return std::filesystem::read_symlink("/proc/self/exe", ec).string();
}

std::string LoadAverage() {
  const std::string text = ReadFile("/proc/loadavg").value_or("?");
  return text.substr(0, text.find(' '));
}

// The *.xplane.pb files of `dir`, sorted by name (as ExpandAnalyzeInputs lists a folder).
std::vector<std::string> TraceFiles(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (absl::EndsWith(name, kSuffix) && name.size() > kSuffix.size()) {
      files.push_back(e.path().string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

// --- the data set ------------------------------------------------------------------------------

struct DataKnobs {
  int64_t hosts = 64;
  int64_t events = 1'000'000;
  int64_t gpus = 8;
  int64_t kernels_per_step = 256;
  int64_t step_ms = 25;

  synthetic::SyntheticJobConfig Config(int64_t rank) const {
    synthetic::SyntheticJobConfig c;
    c.rank = rank;
    c.world = hosts;
    c.seed = 7;
    c.step_ms = step_ms;
    c.gpus = gpus;
    c.kernels_per_step = kernels_per_step;
    // A realistic pod: one straggler (compute x1.25) and one input-bound rank (+20% of a step).
    c.straggler_rank = hosts / 3;
    c.straggler_factor = 1.25;
    c.input_stall_rank = 2 * hosts / 3;
    c.input_stall_ms = std::max<int64_t>(1, step_ms / 5);
    return c;
  }
  // The first line of bench_data.txt: data made with other knobs is made again.
  std::string Key() const {
    return absl::StrCat("hosts=", hosts, " events=", events, " gpus=", gpus,
                        " kernels_per_step=", kernels_per_step, " step_ms=", step_ms, " seed=7");
  }
};

struct DataFile {
  std::string name;
  int64_t events = 0;
  int64_t bytes = 0;
};

struct DataSet {
  std::vector<DataFile> files;
  int64_t steps = 0;
  double window_s = 0;
  int64_t TotalEvents() const {
    int64_t n = 0;
    for (const DataFile& f : files) n += f.events;
    return n;
  }
  int64_t TotalBytes() const {
    int64_t n = 0;
    for (const DataFile& f : files) n += f.bytes;
    return n;
  }
  const DataFile& Largest() const {
    return *std::max_element(files.begin(), files.end(), [](const DataFile& a, const DataFile& b) {
      return a.bytes < b.bytes;
    });
  }
};

// bench_data.txt: the knobs' key, "steps=S window_s=W", then "name events bytes" per file.
std::optional<DataSet> LoadDataSet(const std::string& dir, const DataKnobs& knobs) {
  absl::StatusOr<std::string> text = ReadFile(JoinPath(dir, kDataManifest));
  if (!text.ok()) return std::nullopt;
  std::vector<std::string> lines = absl::StrSplit(*text, '\n', absl::SkipEmpty());
  if (lines.size() < 2 || lines[0] != knobs.Key()) return std::nullopt;
  DataSet set;
  if (std::sscanf(lines[1].c_str(), "steps=%ld window_s=%lf", &set.steps, &set.window_s) != 2) {
    return std::nullopt;
  }
  for (size_t i = 2; i < lines.size(); ++i) {
    std::vector<std::string> parts = absl::StrSplit(lines[i], ' ');
    DataFile f;
    if (parts.size() != 3 || !absl::SimpleAtoi(parts[1], &f.events) ||
        !absl::SimpleAtoi(parts[2], &f.bytes)) {
      return std::nullopt;
    }
    f.name = parts[0];
    std::error_code ec;
    const auto size = std::filesystem::file_size(JoinPath(dir, f.name), ec);
    if (ec || static_cast<int64_t>(size) != f.bytes) return std::nullopt;
    set.files.push_back(f);
  }
  if (static_cast<int64_t>(set.files.size()) != knobs.hosts) return std::nullopt;
  if (static_cast<int64_t>(TraceFiles(dir).size()) != knobs.hosts) return std::nullopt;
  return set;
}

// One synthetic job, rank i per file, a window of whole steps holding about knobs.events events
// per host; two threads (one per core).
int Generate(const std::string& dir, const DataKnobs& knobs) {
  std::error_code ec;
  std::filesystem::remove(JoinPath(dir, kDataManifest), ec);
  for (const std::string& f : TraceFiles(dir)) std::filesystem::remove(f, ec);
  if (absl::Status s = MakeDirs(dir); !s.ok()) {
    std::cerr << s.message() << "\n";
    return 1;
  }
  if (absl::Status s = synthetic::ValidateSyntheticJobConfig(knobs.Config(0)); !s.ok()) {
    std::cerr << s.message() << "\n";
    return 2;
  }
  const synthetic::SyntheticJob job0(knobs.Config(0));
  const int64_t per_step = job0.HostEventsPerStep() + job0.DeviceEventsPerStep();
  const int64_t steps = std::max<int64_t>(1, (knobs.events + per_step / 2) / per_step);
  // Whole steps of the common grid (every rank's step k starts at the same true instant).
  const int64_t k0 = job0.StepIndexAt(kT0) + 1;
  const int64_t start = job0.StepStartNs(k0), stop = job0.StepStartNs(k0 + steps);
  std::vector<DataFile> files(static_cast<size_t>(knobs.hosts));
  std::atomic<int64_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex log_mu;
  auto worker = [&] {
    for (int64_t i = next++; i < knobs.hosts; i = next++) {
      tensorflow::profiler::XSpace space;
      synthetic::SyntheticJob(knobs.Config(i)).Generate(start, stop, &space);
      DataFile& f = files[static_cast<size_t>(i)];
      f.name = absl::StrCat("host", i, kSuffix);
      f.events = xspace::CountEvents(space);
      std::string bytes;
      if (!space.SerializeToString(&bytes)) failed = true;
      space.Clear();
      f.bytes = static_cast<int64_t>(bytes.size());
      std::ofstream out(JoinPath(dir, f.name), std::ios::binary | std::ios::trunc);
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      out.close();
      if (!out) failed = true;
      std::lock_guard<std::mutex> lock(log_mu);
      std::cerr << absl::StrFormat("generated %s: %d events, %d bytes\n", f.name, f.events,
                                   f.bytes);
    }
  };
  std::thread t1(worker), t2(worker);
  t1.join();
  t2.join();
  if (failed) {
    std::cerr << "generate: a file could not be written in " << dir << "\n";
    return 1;
  }
  std::string manifest = absl::StrCat(knobs.Key(), "\n", "steps=", steps,
                                      absl::StrFormat(" window_s=%.3f", Sec(stop - start)), "\n");
  for (const DataFile& f : files)
    absl::StrAppend(&manifest, f.name, " ", f.events, " ", f.bytes, "\n");
  if (absl::Status s = WriteFileAtomically(JoinPath(dir, kDataManifest), manifest); !s.ok()) {
    std::cerr << s.message() << "\n";
    return 1;
  }
  return 0;
}

// --- parse-only --------------------------------------------------------------------------------

int ParseOnly(const std::string& dir, int64_t threads) {
  const std::vector<std::string> files = TraceFiles(dir);
  std::atomic<size_t> next{0};
  std::atomic<int64_t> events{0};
  std::atomic<int> bad{0};
  auto worker = [&] {
    for (size_t i = next++; i < files.size(); i = next++) {
      // The same steps and lifetimes as AnalyzeTraces for an XSpace file.
      absl::StatusOr<std::string> bytes = ReadFile(files[i]);
      if (!bytes.ok()) {
        ++bad;
        continue;
      }
      tensorflow::profiler::XSpace space;
      if (!space.ParseFromString(*bytes)) {
        ++bad;
        continue;
      }
      bytes->clear();
      if (!xspace::Validate(space).ok()) ++bad;
      events += xspace::CountEvents(space);
    }
  };
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  std::cout << files.size() << " files, " << events.load() << " events, " << bad.load() << " bad\n";
  return bad.load() == 0 && !files.empty() ? 0 : 1;
}

// --- wire-scan: the cost floor of a streaming reader ---------------------------------------------

struct ScanTotals {
  int64_t planes = 0, lines = 0, events = 0, stats = 0;
  uint64_t checksum = 0;  // of every event's metadata id, offset and duration and every stat
};

using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;

// Walks one length-delimited field's bytes with `fn(tag)` per field; fn returns false on error.
template <typename Fn>
bool Nested(CodedInputStream& in, Fn fn) {
  uint32_t len = 0;
  if (!in.ReadVarint32(&len)) return false;
  const CodedInputStream::Limit limit = in.PushLimit(static_cast<int>(len));
  while (const uint32_t tag = in.ReadTag()) {
    if (!fn(tag)) return false;
  }
  const bool ok = in.ConsumedEntireMessage();
  in.PopLimit(limit);
  return ok;
}

// A varint field's value into the checksum; any other field skipped.
bool Value(CodedInputStream& in, uint32_t tag, ScanTotals& t) {
  if (WireFormatLite::GetTagWireType(tag) != WireFormatLite::WIRETYPE_VARINT) {
    return WireFormatLite::SkipField(&in, tag);
  }
  uint64_t v = 0;
  if (!in.ReadVarint64(&v)) return false;
  t.checksum = t.checksum * 31 + v;
  return true;
}

// XSpace.planes(1) > XPlane.lines(3) > XLine.events(4) > XEvent {metadata_id, offset_ps,
// duration_ps, stats(4) > XStat {metadata_id, value}}: every event's numbers decoded, nothing
// allocated. Plane metadata (fields 4, 5) is skipped: it is small, and a real reader decodes it
// once per plane.
bool ScanSpace(const std::string& bytes, ScanTotals& t) {
  CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                      static_cast<int>(bytes.size()));
  auto stat = [&](uint32_t tag) { return Value(in, tag, t); };
  auto event = [&](uint32_t tag) {
    if (WireFormatLite::GetTagFieldNumber(tag) == 4) {
      ++t.stats;
      return Nested(in, stat);
    }
    return Value(in, tag, t);
  };
  auto line = [&](uint32_t tag) {
    if (WireFormatLite::GetTagFieldNumber(tag) == 4) {
      ++t.events;
      return Nested(in, event);
    }
    return Value(in, tag, t);
  };
  auto plane = [&](uint32_t tag) {
    if (WireFormatLite::GetTagFieldNumber(tag) == 3) {
      ++t.lines;
      return Nested(in, line);
    }
    return WireFormatLite::SkipField(&in, tag);
  };
  while (const uint32_t tag = in.ReadTag()) {
    if (WireFormatLite::GetTagFieldNumber(tag) == 1) {
      ++t.planes;
      if (!Nested(in, plane)) return false;
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      return false;
    }
  }
  return in.ConsumedEntireMessage();
}

int WireScan(const std::string& dir, int64_t threads) {
  const std::vector<std::string> files = TraceFiles(dir);
  std::atomic<size_t> next{0};
  std::atomic<int64_t> events{0}, read_ns{0}, scan_ns{0};
  std::atomic<int> bad{0};
  auto worker = [&] {
    for (size_t i = next++; i < files.size(); i = next++) {
      std::string bytes;
      int64_t t = NowNs();
      if (absl::StatusOr<std::string> read = ReadFile(files[i]); read.ok()) {
        bytes = *std::move(read);  // one read() into a buffer sized by fstat
      } else {
        ++bad;
        continue;
      }
      read_ns += NowNs() - t;
      t = NowNs();
      ScanTotals totals;
      if (!ScanSpace(bytes, totals)) ++bad;
      scan_ns += NowNs() - t;
      events += totals.events;
    }
  };
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  std::cout << absl::StrFormat("%d files, %d events, %d bad; read %.2f s, walk %.2f s (CPU)\n",
                               files.size(), events.load(), bad.load(), Sec(read_ns.load()),
                               Sec(scan_ns.load()));
  return bad.load() == 0 && !files.empty() ? 0 : 1;
}

// --- phases: an instrumented AnalyzeTraces ------------------------------------------------------

template <typename T>
int64_t VectorBytes(const std::vector<T>& v) {
  return static_cast<int64_t>(v.capacity() * sizeof(T));
}
int64_t StringBytes(const std::string& s) {
  return s.capacity() > 15 ? static_cast<int64_t>(s.capacity() + 1) : 0;
}

int64_t TraceBytes(const analysis::HostTrace& t) {
  int64_t n = static_cast<int64_t>(sizeof(t)) + VectorBytes(t.steps) + VectorBytes(t.devices) +
              VectorBytes(t.host_ops);
  for (const analysis::DeviceTrace& d : t.devices) n += VectorBytes(d.ops) + StringBytes(d.name);
  for (const std::string& w : t.warnings) n += StringBytes(w);
  return n;
}

// What AnalyzeTraces keeps per host until BuildPodBreakdown.
int64_t SummaryBytes(const analysis::HostSummary& s) {
  int64_t n = static_cast<int64_t>(sizeof(s)) + StringBytes(s.host) + VectorBytes(s.steps) +
              VectorBytes(s.warnings);
  for (const analysis::HostStep& st : s.steps) n += VectorBytes(st.devices);
  for (const std::string& w : s.warnings) n += StringBytes(w);
  return n;
}

int64_t BreakdownBytes(const analysis::PodBreakdown& b) {
  int64_t n = static_cast<int64_t>(sizeof(b)) + VectorBytes(b.steps) + VectorBytes(b.hosts);
  for (const analysis::PodStep& s : b.steps) {
    n += VectorBytes(s.hosts) + StringBytes(s.straggler) + StringBytes(s.why);
    for (const analysis::PodHostStep& h : s.hosts) n += StringBytes(h.host);
  }
  return n;
}

int Phases(const std::string& dir) {
  enum Phase { kDecode, kSummarize, kFreeTrace, kNumPhases };
  const char* kNames[] = {"ReadXSpaceHost (wire-format walk of the file, pread)", "SummarizeHost",
                          "free HostTrace"};
  int64_t time_ns[kNumPhases] = {};
  int64_t rss_after[kNumPhases] = {};  // max over hosts of VmRSS right after the phase
  int64_t max_file = 0, max_trace = 0, summaries = 0, max_summary = 0;
  int64_t steps = 0, devices = 0;
  const int64_t measure_ns = 0;
  const int64_t rss_start = ProcStatusBytes("VmRSS:");
  const analysis::ReaderOptions options;
  std::vector<analysis::HostSummary> kept;
  const int64_t t_all = NowNs();
  for (const std::string& path : TraceFiles(dir)) {
    auto mark = [&](Phase p, int64_t since) {
      time_ns[p] += NowNs() - since;
      rss_after[p] = std::max(rss_after[p], ProcStatusBytes("VmRSS:"));
    };
    int64_t t = NowNs();
    absl::StatusOr<std::unique_ptr<FileByteSource>> file = FileByteSource::OpenFile(path);
    if (!file.ok()) {
      std::cerr << file.status().message() << "\n";
      return 1;
    }
    max_file = std::max(max_file, static_cast<int64_t>((*file)->size()));
    const std::string stem = std::filesystem::path(path).filename().string();
    absl::StatusOr<analysis::HostTrace> trace = analysis::ReadXSpaceHost(
        **file, stem.substr(0, stem.size() - kSuffix.size()), /*offset_ns=*/0, options);
    mark(kDecode, t);
    if (!trace.ok()) {
      std::cerr << path << ": " << trace.status().message() << "\n";
      return 1;
    }
    max_trace = std::max(max_trace, TraceBytes(*trace));
    t = NowNs();
    kept.push_back(analysis::SummarizeHost(*std::move(trace)));
    mark(kSummarize, t);
    t = NowNs();
    trace = absl::StatusOr<analysis::HostTrace>();
    mark(kFreeTrace, t);
    const int64_t sb = SummaryBytes(kept.back());
    summaries += sb;
    max_summary = std::max(max_summary, sb);
    steps = std::max(steps, static_cast<int64_t>(kept.back().steps.size()));
    if (!kept.back().steps.empty()) {
      devices = static_cast<int64_t>(kept.back().steps[0].devices.size());
    }
  }
  const int64_t loop_ns = NowNs() - t_all;
  int64_t hosts_ns = 0;  // the phases' sum: the loop without the measurements
  for (int64_t ns : time_ns) hosts_ns += ns;
  int64_t t = NowNs();
  const analysis::PodBreakdown pod = analysis::BuildPodBreakdown(kept);
  const int64_t pod_ns = NowNs() - t;
  const int64_t rss_pod = ProcStatusBytes("VmRSS:");
  report::BreakdownContext context;
  context.session = "analyze";
  context.source = report::BreakdownSource::kAnalyze;
  std::vector<std::pair<std::string, int64_t>> writers;  // name, ns
  std::vector<int64_t> writer_bytes;
  for (const report::BreakdownOutput& out : report::BreakdownOutputs()) {
    t = NowNs();
    const std::string text = out.render(pod, context);
    writers.emplace_back(std::string(out.file_name), NowNs() - t);
    writer_bytes.push_back(static_cast<int64_t>(text.size()));
  }
  const size_t hosts = kept.size();

  std::cout << absl::StrFormat(
      "phases: %d hosts, %d steps x %d devices each; per-host phases %.2f s (loop %.2f s, of "
      "which %.2f s measuring sizes)\n\n"
      "| phase (all hosts, one thread) | time (s) | share of the per-host phases | RSS after it, "
      "max over hosts (MiB) |\n|---|---|---|---|\n",
      hosts, steps, devices, Sec(hosts_ns), Sec(loop_ns), Sec(measure_ns));
  for (int p = 0; p < kNumPhases; ++p) {
    std::cout << absl::StrFormat(
        "| %s | %.2f | %.0f %% | %.1f |\n", kNames[p], Sec(time_ns[p]),
        100.0 * static_cast<double>(time_ns[p]) / static_cast<double>(hosts_ns),
        MiB(static_cast<double>(rss_after[p])));
  }
  std::cout << absl::StrFormat("| BuildPodBreakdown | %.3f | | %.1f |\n", Sec(pod_ns),
                               MiB(static_cast<double>(rss_pod)));
  for (size_t i = 0; i < writers.size(); ++i) {
    std::cout << absl::StrFormat("| render %s (%.1f MiB) | %.3f | | |\n", writers[i].first,
                                 MiB(static_cast<double>(writer_bytes[i])), Sec(writers[i].second));
  }
  std::cout << absl::StrFormat(
      "\nsizes: largest file %.1f MiB; "
      "HostTrace (max) %.1f MiB; HostSummary %.1f KiB max, %.2f MiB for all %d hosts "
      "(%.0f bytes per step x device); PodBreakdown %.2f MiB; process RSS at start %.1f MiB, "
      "peak (VmHWM) %.1f MiB\n",
      MiB(static_cast<double>(max_file)), MiB(static_cast<double>(max_trace)),
      static_cast<double>(max_summary) / 1024, MiB(static_cast<double>(summaries)), hosts,
      static_cast<double>(summaries) /
          static_cast<double>(std::max<int64_t>(1, static_cast<int64_t>(hosts) * steps * devices)),
      MiB(static_cast<double>(BreakdownBytes(pod))), MiB(static_cast<double>(rss_start)),
      MiB(static_cast<double>(ProcStatusBytes("VmHWM:"))));
  return 0;
}

// --- run: child processes ----------------------------------------------------------------------

struct Sample {
  int exit_code = -1;
  int64_t wall_ns = 0;
  double cpu_s = 0;
  double rss_mib = 0;
  int64_t minor_faults = 0;
};

// Runs argv as a child process, stdout to `out`, stderr to `err`; wall time from spawn to reaped.
Sample Spawn(std::vector<std::string> argv, const std::string& out, const std::string& err) {
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  Sample s;
  const int64_t t0 = NowNs();
  pid_t pid = 0;
  rusage usage{};
  if (posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ) == 0) {
    int status = 0;
    if (wait4(pid, &status, 0, &usage) == pid && WIFEXITED(status)) {
      s.exit_code = WEXITSTATUS(status);
    }
  }
  s.wall_ns = NowNs() - t0;
  posix_spawn_file_actions_destroy(&actions);
  s.cpu_s = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
            static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  s.rss_mib = static_cast<double>(usage.ru_maxrss) / 1024;  // KiB on Linux
  s.minor_faults = usage.ru_minflt;
  return s;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Row {
  Row(std::string w, std::vector<std::string> a) : what(std::move(w)), argv(std::move(a)) {}
  std::string what;
  std::vector<std::string> argv;
  std::vector<Sample> samples;
  double wall() const {
    std::vector<double> v;
    for (const Sample& s : samples) v.push_back(Sec(s.wall_ns));
    return Median(v);
  }
  double cpu() const {
    std::vector<double> v;
    for (const Sample& s : samples) v.push_back(s.cpu_s);
    return Median(v);
  }
  double rss() const {
    std::vector<double> v;
    for (const Sample& s : samples) v.push_back(s.rss_mib);
    return Median(v);
  }
  double faults() const {
    std::vector<double> v;
    for (const Sample& s : samples) v.push_back(static_cast<double>(s.minor_faults));
    return Median(v);
  }
  std::string Range() const {
    double lo = 1e30, hi = 0;
    for (const Sample& s : samples) {
      lo = std::min(lo, Sec(s.wall_ns));
      hi = std::max(hi, Sec(s.wall_ns));
    }
    return absl::StrFormat("%.2f–%.2f", lo, hi);
  }
};

int Run(const std::string& dir, const DataKnobs& knobs, int64_t runs, bool out_run, bool phases,
        const std::string& profctl, bool regenerate) {
  const std::string self = SelfPath();
  char tmpl[] = "/tmp/profctl_analyze_bench_scratch_XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return 1;
  const std::string scratch = tmpl;
  const std::string err = scratch + "/child.err";
  std::optional<DataSet> data = regenerate ? std::nullopt : LoadDataSet(dir, knobs);
  if (!data) {
    std::cerr << "generating " << knobs.hosts << " files in " << dir << " (" << knobs.Key()
              << ")...\n";
    Sample g = Spawn({self, "generate", "--data=" + dir, absl::StrCat("--hosts=", knobs.hosts),
                      absl::StrCat("--events=", knobs.events), absl::StrCat("--gpus=", knobs.gpus),
                      absl::StrCat("--kernels-per-step=", knobs.kernels_per_step),
                      absl::StrCat("--step-ms=", knobs.step_ms)},
                     "/dev/null", err);
    data = LoadDataSet(dir, knobs);
    if (g.exit_code != 0 || !data) {
      std::cerr << "generate failed (exit " << g.exit_code << "): " << ReadFile(err).value_or("")
                << "\n";
      return 1;
    }
    std::cerr << absl::StrFormat("generated in %.1f s (2 threads)\n", Sec(g.wall_ns));
  }
  int64_t min_events = INT64_MAX, max_events = 0;
  for (const DataFile& f : data->files) {
    min_events = std::min(min_events, f.events);
    max_events = std::max(max_events, f.events);
  }
  const DataFile& largest = data->Largest();
  std::cout << absl::StrFormat(
      "data: %s, %d files, %d events in all (%d..%d per file), %.1f MiB in all, largest %s "
      "%d bytes (%.1f MiB); %d steps of %.1f ms per host (window %.3f s), %d GPUs, %d "
      "kernels/step; load average before: %s\n\n",
      dir, data->files.size(), data->TotalEvents(), min_events, max_events,
      MiB(static_cast<double>(data->TotalBytes())), largest.name, largest.bytes,
      MiB(static_cast<double>(largest.bytes)), data->steps,
      data->window_s * 1e3 / static_cast<double>(data->steps), data->window_s, knobs.gpus,
      knobs.kernels_per_step, LoadAverage());

  const std::string out_dir = scratch + "/out";
  std::vector<Row> rows = {
      {"floor: `profctl help` (start-up only)", {profctl, "help"}},
      {"parse-only, 1 thread (read + ParseFromString + Validate)", {self, "parse-only", dir}},
      {"parse-only, 2 threads (same, two files at a time)",
       {self, "parse-only", dir, "--threads=2"}},
      {"`profctl analyze DIR --json > /dev/null` (default: one job per core)",
       {profctl, "analyze", dir, "--json"}},
      {"`profctl analyze DIR --json --jobs=1`", {profctl, "analyze", dir, "--json", "--jobs=1"}},
  };
  if (out_run) {
    rows.push_back({"`profctl analyze DIR --out=OUT` (table + JSON, CSV, report.html)",
                    {profctl, "analyze", dir, "--out=" + out_dir}});
  }
  rows.push_back({"diagnostic: wire-scan, 1 thread (one read() + raw wire walk, no XSpace)",
                  {self, "wire-scan", dir}});
  rows.push_back({"diagnostic: wire-scan, 2 threads", {self, "wire-scan", dir, "--threads=2"}});
  for (int64_t run = 0; run < runs; ++run) {
    for (Row& row : rows) {
      row.samples.push_back(Spawn(row.argv, "/dev/null", err));
      const Sample& s = row.samples.back();
      std::cerr << absl::StrFormat("run %d %s: exit %d, wall %.2f s, cpu %.2f s, rss %.1f MiB\n",
                                   run, row.what, s.exit_code, Sec(s.wall_ns), s.cpu_s, s.rss_mib);
      if (s.exit_code != 0 && row.argv[1] != "help") {
        std::cerr << "failed: " << ReadFile(err).value_or("") << "\n";
        return 1;
      }
    }
  }
  std::cout << absl::StrFormat(
      "| what | runs | wall, median (min–max) (s) | CPU user+sys, median (s) | peak RSS, median "
      "(MiB) | minor page faults, median |\n|---|---|---|---|---|---|\n");
  for (const Row& row : rows) {
    std::cout << absl::StrFormat("| %s | %d | %.2f (%s) | %.2f | %.1f | %.0f |\n", row.what,
                                 row.samples.size(), row.wall(), row.Range(), row.cpu(), row.rss(),
                                 row.faults());
  }
  const Row& parse1 = rows[1];
  const Row& parse2 = rows[2];
  const Row& analyze = rows[3];
  const Row& analyze1 = rows[4];
  const Row& scan1 = rows[rows.size() - 2];
  const Row& scan2 = rows[rows.size() - 1];
  const double file_mib = MiB(static_cast<double>(largest.bytes));
  std::cout << absl::StrFormat(
      "\ntargets (analyze --json, medians):\n"
      "- wall < 10 s: %s (%.2f s; --jobs=1: %.2f s)\n"
      "- wall < 2x the time to just parse: against protobuf ParseFromString+Validate at the same "
      "parallelism (2 threads %.2f s, 1 thread %.2f s): %.2fx and %.2fx (--jobs=1); against the "
      "bare wire walk (wire-scan, 2 threads %.2f s, 1 thread %.2f s): %.2fx and %.2fx\n"
      "- peak RSS < 2 x largest file (2 x %.1f = %.1f MiB) + per-host summaries: see the "
      "summaries' size below; peak RSS %.1f MiB (--jobs=1: %.1f MiB) = %.2f x the largest file "
      "(parse-only: %.1f MiB = %.2f x)\n",
      analyze.wall() < 10 ? "MET" : "NOT MET", analyze.wall(), analyze1.wall(), parse2.wall(),
      parse1.wall(), analyze.wall() / parse2.wall(), analyze1.wall() / parse1.wall(), scan2.wall(),
      scan1.wall(), analyze.wall() / scan2.wall(), analyze1.wall() / scan1.wall(), file_mib,
      2 * file_mib, analyze.rss(), analyze1.rss(), analyze.rss() / file_mib, parse1.rss(),
      parse1.rss() / file_mib);
  if (out_run) {
    std::cout << "\noutputs of the --out run:";
    for (absl::string_view f :
         {report::kBreakdownJsonFile, report::kBreakdownCsvFile, report::kReportHtmlFile}) {
      std::error_code ec;
      const auto size = std::filesystem::file_size(JoinPath(out_dir, f), ec);
      std::cout << absl::StrFormat(" %s %.2f MiB;", f, ec ? -1.0 : MiB(static_cast<double>(size)));
    }
    std::cout << "\n";
  }
  std::cout.flush();
  int rc = 0;
  if (phases) {
    const std::string phases_out = scratch + "/phases.out";
    const std::vector<std::string> argv = {self, "phases", dir};
    Sample s = Spawn(argv, phases_out, err);
    std::cout << "\n" << ReadFile(phases_out).value_or("");
    std::cout << absl::StrFormat("(phases child: wall %.2f s, cpu %.2f s, peak RSS %.1f MiB)\n",
                                 Sec(s.wall_ns), s.cpu_s, s.rss_mib);
    if (s.exit_code != 0) {
      std::cerr << "phases failed: " << ReadFile(err).value_or("") << "\n";
      rc = 1;
    }
  }
  rusage self_usage{};
  getrusage(RUSAGE_SELF, &self_usage);
  std::cout << absl::StrFormat(
      "\n(this parent's own peak RSS, inherited by each child at spawn: %.1f MiB; load average "
      "after: %s)\n",
      static_cast<double>(self_usage.ru_maxrss) / 1024, LoadAverage());
  std::filesystem::remove_all(scratch);
  return rc;
}

int Main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string mode = "run";
  if (!args.empty() && !absl::StartsWith(args[0], "-")) {
    mode = args[0];
    args.erase(args.begin());
  }
  if (mode != "run" && mode != "generate" && mode != "parse-only" && mode != "phases" &&
      mode != "wire-scan") {
    std::cerr << "usage: analyze_benchmark [run|generate|parse-only DIR|wire-scan DIR|phases DIR] "
                 "[flags]\n";
    return 2;
  }
  DataKnobs knobs;
  std::string dir = "/tmp/profctl_analyze_bench";
  std::string profctl = test_paths::CliBinary();
  int64_t runs = 3, threads = 1;
  bool out_run = true, phases = true, regenerate = false;
  FlagSet fs("analyze_benchmark " + mode);
  fs.String("data", &dir, "folder of the host files (made when missing or made with other knobs)");
  fs.Int64("hosts", &knobs.hosts, "hosts (ranks of one synthetic job), one file each");
  fs.Int64("events", &knobs.events, "about this many events per host file");
  fs.Int64("gpus", &knobs.gpus, "GPUs per host (1..16)");
  fs.Int64("kernels-per-step", &knobs.kernels_per_step, "kernels per step per GPU (1..256)");
  fs.Int64("step-ms", &knobs.step_ms, "nominal step period, ms");
  fs.Int64("runs", &runs, "run: samples per row");
  fs.Bool("out-run", &out_run, "run: also time `profctl analyze --out=DIR`");
  fs.Bool("phases", &phases, "run: end with the instrumented phases mode");
  fs.Bool("regenerate", &regenerate, "run: make the data again even when it is there");
  fs.String("profctl", &profctl, "run: the profctl binary");
  fs.Int64("threads", &threads, "parse-only, wire-scan: threads");
  if (absl::Status s = fs.Parse(args); !s.ok()) {
    std::cerr << s.message() << "\n";
    return 2;
  }
  if (fs.help_requested()) {
    std::cout << fs.Help();
    return 0;
  }
  if (mode == "parse-only" || mode == "phases" || mode == "wire-scan") {
    if (fs.positional().size() != 1) {
      std::cerr << mode << ": give exactly one DIR\n";
      return 2;
    }
    dir = fs.positional()[0];
  }
  if (mode == "generate") return Generate(dir, knobs);
  if (mode == "parse-only") return ParseOnly(dir, std::max<int64_t>(1, threads));
  if (mode == "phases") return Phases(dir);
  if (mode == "wire-scan") return WireScan(dir, std::max<int64_t>(1, threads));
  return Run(dir, knobs, std::max<int64_t>(1, runs), out_run, phases, profctl, regenerate);
}

}  // namespace
}  // namespace profctl::bench

int main(int argc, char** argv) { return profctl::bench::Main(argc, argv); }

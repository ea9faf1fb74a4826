// What saving one host's trace costs the coordinator at scale (docs/perf.md, "What gRPC alone
// costs a host"): a host of multihost_benchmark scale (one rank of a 1,024-rank synthetic job, 1
// GPU, 2 kernels a 50 ms step, 1 s: about 18 KB of XSpace), as the capture saves it: its file made
// and written, read back, parsed and validated, decoded for the breakdown, the hang record, the
// collective ends and the counts, committed, and its part of the Perfetto pod trace rendered.
// Beside it the parts alone, to say where the time goes.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "analysis/readers/xspace_reader.h"
#include "common/byte_source.h"
#include "common/clock.h"
#include "coordinator/engine/host_trace.h"
#include "coordinator/session/session_writer.h"
#include "report/pod_perfetto_trace.h"
#include "synthetic/synthetic_job.h"
#include "xspace/xspace.h"

namespace profctl {
namespace {

constexpr int64_t kT0 = 1'767'225'600LL * kNanosPerSecond;

const std::string& ScaleHostBytes() {
  static const std::string* const bytes = [] {
    synthetic::SyntheticJobConfig c = *synthetic::ParseSyntheticJobConfig(
        "rank=0,world=1024,seed=3,step_ms=50,gpus=1,kernels_per_step=2");
    tensorflow::profiler::XSpace space;
    synthetic::SyntheticJob(c).Generate(kT0, kT0 + kNanosPerSecond, &space);
    return new std::string(space.SerializeAsString());
  }();
  return *bytes;
}

std::shared_ptr<const analysis::StepMatcher> Matcher() {
  static const auto m = std::make_shared<const analysis::StepMatcher>(
      *analysis::StepMatcher::Create(analysis::kDefaultStepPattern));
  return m;
}

coordinator::SessionDir& Dir() {
  static coordinator::SessionDir* const dir = [] {
    std::string root = (std::filesystem::temp_directory_path() / "profctl-save-bench-XXXXXX");
    if (mkdtemp(root.data()) == nullptr) std::abort();
    static const std::string kept = root;
    std::atexit([] { std::filesystem::remove_all(kept); });
    return new coordinator::SessionDir(*coordinator::SessionDir::Create(root, "bench"));
  }();
  return *dir;
}

// The whole save, as CollectPhase::Save runs it for a host of a Perfetto pod trace.
void BM_SaveScaleHost(benchmark::State& state) {
  const std::string& bytes = ScaleHostBytes();
  coordinator::SaveInput in;
  in.host = "p0-0";
  in.collectives = true;
  in.max_collective_ends = 4096;
  in.steps = Matcher();
  in.pod_trace_index = 0;
  int64_t n = 0;
  for (auto _ : state) {
    // A name of its own each time, as every host of a capture has: no file is replaced.
    in.host = absl::StrCat("p0-", n++);
    std::unique_ptr<coordinator::TraceFile> file = *Dir().Create(in.host);
    if (!file->Append(bytes).ok()) state.SkipWithError("append");
    coordinator::SaveOutcome out = coordinator::SaveHostTrace(*file, in);
    if (!out.status.ok() || out.pod_trace == nullptr) state.SkipWithError("save");
    benchmark::DoNotOptimize(out);
  }
  state.counters["bytes"] = static_cast<double>(bytes.size());
}
BENCHMARK(BM_SaveScaleHost)->Unit(benchmark::kMicrosecond);

// Parsing the bytes into an XSpace and validating it.
void BM_ParseAndValidateScaleHost(benchmark::State& state) {
  const std::string& bytes = ScaleHostBytes();
  for (auto _ : state) {
    coordinator::DecodedTrace t;
    if (!t.Parse(bytes) || !xspace::Validate(t.space()).ok()) state.SkipWithError("parse");
    benchmark::DoNotOptimize(t);
  }
}
BENCHMARK(BM_ParseAndValidateScaleHost)->Unit(benchmark::kMicrosecond);

// The one pass of the wire reader: everything the session keeps of the host.
void BM_DecodeScaleHost(benchmark::State& state) {
  const std::string& bytes = ScaleHostBytes();
  const analysis::HostDecodeOptions options{
      .breakdown = true, .collectives = true, .collective_ends = true, .counts = true};
  for (auto _ : state) {
    absl::StatusOr<analysis::HostDecode> d =
        analysis::DecodeXSpaceHost(StringByteSource(bytes), "p0-0", 0, *Matcher(), options);
    if (!d.ok()) state.SkipWithError("decode");
    benchmark::DoNotOptimize(d);
  }
}
BENCHMARK(BM_DecodeScaleHost)->Unit(benchmark::kMicrosecond);

// The host's part of the Perfetto pod trace, from the parsed XSpace.
void BM_RenderPerfettoScaleHost(benchmark::State& state) {
  coordinator::DecodedTrace t;
  if (!t.Parse(ScaleHostBytes())) std::abort();
  for (auto _ : state) {
    absl::StatusOr<report::PerfettoHostFragment> part =
        report::RenderPerfettoHost("p0-0", t.space(), 0);
    if (!part.ok()) state.SkipWithError("render");
    benchmark::DoNotOptimize(part);
  }
}
BENCHMARK(BM_RenderPerfettoScaleHost)->Unit(benchmark::kMicrosecond);

// The file alone: made, written, read back and committed.
void BM_TraceFileScaleHost(benchmark::State& state) {
  const std::string& bytes = ScaleHostBytes();
  int64_t n = 0;
  for (auto _ : state) {
    const std::string host = absl::StrCat("f0-", n++);
    std::unique_ptr<coordinator::TraceFile> file = *Dir().Create(host);
    if (!file->Append(bytes).ok()) state.SkipWithError("append");
    absl::StatusOr<std::string> back = file->ReadAll();
    if (!back.ok() || !file->Commit(host + ".xplane.pb").ok()) state.SkipWithError("file");
    benchmark::DoNotOptimize(back);
  }
}
BENCHMARK(BM_TraceFileScaleHost)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace profctl

BENCHMARK_MAIN();

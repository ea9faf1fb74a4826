// The per-host work on a capture's critical path: generating (synthetic) or receiving a trace,
// parsing and validating it on the coordinator, and writing the aligned pod trace.
// Results and the command to reproduce them: docs/perf.md.
#include <benchmark/benchmark.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/gzip.h"
#include "report/pod_perfetto_trace.h"
#include "report/pod_trace_writer.h"
#include "synthetic/synthetic_job.h"
#include "xspace/xspace.h"

namespace profctl {
namespace {

constexpr int64_t kT0 = 1'767'225'600LL * kNanosPerSecond;

tensorflow::profiler::XSpace OneHost(int64_t seconds) {
  synthetic::SyntheticJobConfig c =
      *synthetic::ParseSyntheticJobConfig("world=8,gpus=8,step_ms=100,kernels_per_step=64");
  tensorflow::profiler::XSpace space;
  synthetic::SyntheticJob(c).Generate(kT0, kT0 + seconds * kNanosPerSecond, &space);
  return space;
}

// One host (8 GPUs, 64 kernels per step) for `range(0)` seconds of capture.
void BM_SyntheticGenerate(benchmark::State& state) {
  int64_t events = 0;
  for (auto _ : state) {
    tensorflow::profiler::XSpace space = OneHost(state.range(0));
    events = xspace::CountEvents(space);
    benchmark::DoNotOptimize(space);
  }
  state.counters["events"] = static_cast<double>(events);
  state.counters["events/s"] = benchmark::Counter(static_cast<double>(events),
                                                  benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_SyntheticGenerate)->Arg(1)->Arg(10)->Unit(benchmark::kMillisecond);

void BM_ParseAndValidate(benchmark::State& state) {
  const std::string bytes = OneHost(state.range(0)).SerializeAsString();
  for (auto _ : state) {
    tensorflow::profiler::XSpace space;
    benchmark::DoNotOptimize(space.ParseFromString(bytes));
    benchmark::DoNotOptimize(xspace::Validate(space));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(bytes.size()));
}
BENCHMARK(BM_ParseAndValidate)->Arg(1)->Arg(10)->Unit(benchmark::kMillisecond);

void BM_PodTraceJsonGzip(benchmark::State& state) {
  const tensorflow::profiler::XSpace space = OneHost(state.range(0));
  const std::string path = "/tmp/profctl_bench_pod.trace.json.gz";
  int64_t derived = 0;
  int64_t bytes = 0;
  for (auto _ : state) {
    absl::StatusOr<report::PodTraceWriter> w = report::PodTraceWriter::Open(path, kT0);
    for (int h = 0; h < 4; ++h) {
      benchmark::DoNotOptimize(w->AddHost("host" + std::to_string(h), space, int64_t{h} * 1000));
    }
    benchmark::DoNotOptimize(w->Finish());
    derived = w->derived_events();
    struct stat st {};
    bytes = ::stat(path.c_str(), &st) == 0 ? st.st_size : 0;
  }
  std::remove(path.c_str());
  state.counters["derived"] = static_cast<double>(derived);  // the GPUs' derived-track events
  state.counters["gz_bytes"] = static_cast<double>(bytes);
  state.counters["events/s"] =
      benchmark::Counter(4.0 * static_cast<double>(xspace::CountEvents(space)),
                         benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_PodTraceJsonGzip)->Arg(1)->Unit(benchmark::kMillisecond);

// The pod trace of 8 heavy hosts (8 GPUs, 256 kernels a step every 100 ms, as
// `multihost_benchmark heavy`) x range(0) seconds, rendered on range(1) threads and joined in
// order as the coordinator does. Counters: the file's bytes per XSpace byte (target <= 0.4), the
// events, and the process CPU time (every thread's).
void BM_PodTraceHeavy(benchmark::State& state) {
  constexpr int kHosts = 8;
  synthetic::SyntheticJobConfig c =
      *synthetic::ParseSyntheticJobConfig("world=8,seed=5,step_ms=100,gpus=8,kernels_per_step=256");
  tensorflow::profiler::XSpace space;
  synthetic::SyntheticJob(c).Generate(kT0, kT0 + state.range(0) * kNanosPerSecond, &space);
  const double xspace_bytes = static_cast<double>(space.ByteSizeLong()) * kHosts;
  if (std::getenv("PROFCTL_BENCH_KEEP") != nullptr) {  // one host's XSpace, to look at
    std::ofstream("/tmp/profctl_bench_heavy.xplane.pb") << space.SerializeAsString();
  }
  const std::string path = "/tmp/profctl_bench_pod_heavy.trace.json.gz";
  const int threads = static_cast<int>(state.range(1));
  int64_t bytes = 0, events = 0;
  for (auto _ : state) {
    absl::StatusOr<report::PodTraceWriter> w = report::PodTraceWriter::Open(path, kT0);
    std::vector<absl::StatusOr<report::RenderedHost>> rendered(kHosts,
                                                               absl::UnknownError("not yet"));
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        for (int h = t; h < kHosts; h += threads) {
          rendered[h] = report::PodTraceWriter::Render(absl::StrCat("host", h), space,
                                                       int64_t{h} * 1000, kT0, h);
        }
      });
    }
    for (std::thread& t : pool) t.join();
    for (const absl::StatusOr<report::RenderedHost>& r : rendered) {
      benchmark::DoNotOptimize(w->AddRendered(*r));
    }
    benchmark::DoNotOptimize(w->Finish());
    events = w->events() + w->flow_events() + w->counter_events() + w->derived_events();
    struct stat st {};
    bytes = ::stat(path.c_str(), &st) == 0 ? st.st_size : 0;
  }
  if (std::getenv("PROFCTL_BENCH_KEEP") == nullptr) std::remove(path.c_str());
  state.counters["xspace_MB"] = xspace_bytes / 1e6;
  state.counters["trace_MB"] = static_cast<double>(bytes) / 1e6;
  state.counters["per_xspace_byte"] = static_cast<double>(bytes) / xspace_bytes;
  state.counters["events"] = static_cast<double>(events);
}
BENCHMARK(BM_PodTraceHeavy)
    ->Args({3, 2})
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

// The same pod as Perfetto's protobuf trace (pod_perfetto_trace.h): each host rendered on its own
// clock into a compressed fragment (range(1) threads), then the fragments joined with their clock
// snapshots. Counters as BM_PodTraceHeavy's, and the fragments' bytes.
void BM_PodPerfettoHeavy(benchmark::State& state) {
  constexpr int kHosts = 8;
  synthetic::SyntheticJobConfig c =
      *synthetic::ParseSyntheticJobConfig("world=8,seed=5,step_ms=100,gpus=8,kernels_per_step=256");
  tensorflow::profiler::XSpace space;
  synthetic::SyntheticJob(c).Generate(kT0, kT0 + state.range(0) * kNanosPerSecond, &space);
  const double xspace_bytes = static_cast<double>(space.ByteSizeLong()) * kHosts;
  const std::string path = "/tmp/profctl_bench_pod_heavy.perfetto-trace.gz";
  const int threads = static_cast<int>(state.range(1));
  int64_t bytes = 0, events = 0, raw = 0;
  for (auto _ : state) {
    absl::StatusOr<report::PodPerfettoWriter> w = report::PodPerfettoWriter::Open(path, kT0);
    std::vector<absl::StatusOr<report::PerfettoHostFragment>> rendered(
        kHosts, absl::UnknownError("not yet"));
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        for (int h = t; h < kHosts; h += threads) {
          rendered[h] = report::RenderPerfettoHost(absl::StrCat("host", h), space, h);
        }
      });
    }
    for (std::thread& t : pool) t.join();
    raw = 0;
    for (const absl::StatusOr<report::PerfettoHostFragment>& r : rendered) {
      benchmark::DoNotOptimize(w->AddHost(*r, int64_t{r->host_index} * 1000));
      raw += static_cast<int64_t>(r->piece.size);
    }
    benchmark::DoNotOptimize(w->Finish());
    events = w->events() + w->counter_samples() + w->derived_events();
    struct stat st {};
    bytes = ::stat(path.c_str(), &st) == 0 ? st.st_size : 0;
  }
  if (std::getenv("PROFCTL_BENCH_KEEP") == nullptr) std::remove(path.c_str());
  state.counters["xspace_MB"] = xspace_bytes / 1e6;
  state.counters["raw_MB"] = static_cast<double>(raw) / 1e6;
  state.counters["trace_MB"] = static_cast<double>(bytes) / 1e6;
  state.counters["per_xspace_byte"] = static_cast<double>(bytes) / xspace_bytes;
  state.counters["events"] = static_cast<double>(events);
}
BENCHMARK(BM_PodPerfettoHeavy)
    ->Args({3, 2})
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

}  // namespace
}  // namespace profctl

BENCHMARK_MAIN();

// CPU time, wall time and peak RSS of reading PyTorch profiler traces (Kineto JSON, gzipped) as
// `profctl analyze` does, against `zcat` of the same files and, when it is installed,
// libdeflate's whole-buffer gunzip (the inflate floor). Not a Google Benchmark: each sample is a
// child process (this program in a child mode, or the tool), timed from spawn to reap, its CPU
// and peak RSS from wait4's rusage, so nothing of one sample stays in the next. Make the data
// with bench/kineto_ranks.py (4 ranks of the real H100 trace, about 158 MB of JSON each).
//
//   kineto_read_benchmark DIR [--runs=3]
//     Interleaved, --runs times each, over every *.pt.trace.json.gz in DIR, one file after the
//     other:
//       zcat        `zcat FILES > /dev/null`
//       libdeflate  `libdeflate-gunzip -c FILE > /dev/null` per file (skipped when absent)
//       whole       this program's `whole` mode: the file's text read and inflated whole under
//                   the caps (ReadKinetoTraceText), then parsed (ReadKinetoTraceFile)
//       stream/1    `stream --threads=1`: parsed as it is read and inflated
//                   (ReadKinetoTraceFromPath), one thread
//       stream/2    `stream --threads=2`: the same, reading and inflating on a second thread
//     and prints the medians and each mode's CPU time per zcat's.
//   kineto_read_benchmark whole|stream FILES... [--threads=N]   (the child modes)
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analysis/readers/kineto_reader.h"
#include "analysis/readers/trace_file.h"

extern char** environ;

namespace profctl::bench {
namespace {

struct Sample {
  double wall_s = 0, cpu_s = 0, rss_mib = 0;
  bool ok = false;
};

// Runs argv (stdout to /dev/null) and measures it.
Sample Spawn(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  Sample s;
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = 0;
  if (posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ) == 0) {
    int status = 0;
    rusage usage{};
    if (wait4(pid, &status, 0, &usage) == pid) {
      s.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      s.cpu_s = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
      s.rss_mib = static_cast<double>(usage.ru_maxrss) / 1024;
    }
  }
  s.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  posix_spawn_file_actions_destroy(&actions);
  return s;
}

// The child modes: each file read, as `mode` says; exit 1 on the first error.
int Child(const std::string& mode, const std::vector<std::string>& files, int threads) {
  int64_t ops = 0;
  for (const std::string& f : files) {
    absl::StatusOr<analysis::HostTrace> trace;
    if (mode == "whole") {
      absl::StatusOr<std::string> text = analysis::ReadKinetoTraceText(f, {});
      trace = text.ok() ? analysis::ReadKinetoTraceFile(*text, f, 0)
                        : absl::StatusOr<analysis::HostTrace>(text.status());
    } else {
      trace = analysis::ReadKinetoTraceFromPath(f, 0, {}, threads);
    }
    if (!trace.ok()) {
      std::cerr << trace.status() << "\n";
      return 1;
    }
    ops += static_cast<int64_t>(trace->host_ops.size());
    for (const analysis::DeviceTrace& d : trace->devices) {
      ops += static_cast<int64_t>(d.ops.size());
    }
  }
  std::cout << ops << " ops\n";
  return 0;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  int threads = 1;
  int runs = 3;
  std::vector<std::string> rest;
  for (const std::string& a : args) {
    if (absl::StartsWith(a, "--threads=")) {
      if (!absl::SimpleAtoi(a.substr(10), &threads)) return 2;
    } else if (absl::StartsWith(a, "--runs=")) {
      if (!absl::SimpleAtoi(a.substr(7), &runs)) return 2;
    } else {
      rest.push_back(a);
    }
  }
  if (rest.empty()) {
    std::cerr << "usage: kineto_read_benchmark DIR [--runs=3]\n";
    return 2;
  }
  if (rest[0] == "whole" || rest[0] == "stream") {
    return Child(rest[0], {rest.begin() + 1, rest.end()}, threads);
  }
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(rest[0])) {
    if (absl::EndsWith(e.path().string(), ".pt.trace.json.gz")) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::cerr << rest[0] << ": no *.pt.trace.json.gz (make them with bench/kineto_ranks.py)\n";
    return 2;
  }
  const std::string self = std::filesystem::canonical("/proc/self/exe");
  std::string quoted;
  for (const std::string& f : files) absl::StrAppend(&quoted, " '", f, "'");
  const bool libdeflate = Spawn({"sh", "-c", "command -v libdeflate-gunzip"}).ok;
  struct Mode {
    std::string name;
    std::vector<std::string> argv;
    std::vector<Sample> samples;
  };
  std::vector<Mode> modes = {
      {"zcat", {"sh", "-c", absl::StrCat("zcat", quoted, " > /dev/null")}, {}},
      {"libdeflate-gunzip (whole buffer)",
       {"sh", "-c",
        absl::StrCat("for f in", quoted, "; do libdeflate-gunzip -c \"$f\" > /dev/null; done")},
       {}},
      {"whole: read + inflate whole, then parse", {self, "whole"}, {}},
      {"stream/1: parse while inflating, 1 thread", {self, "stream", "--threads=1"}, {}},
      {"stream/2: inflate on a second thread", {self, "stream", "--threads=2"}, {}},
  };
  if (!libdeflate) modes.erase(modes.begin() + 1);
  for (Mode& m : modes) {
    if (m.argv[0] == self) m.argv.insert(m.argv.begin() + 2, files.begin(), files.end());
  }
  std::cerr << "load " << std::ifstream("/proc/loadavg").rdbuf() << "\n";
  for (int r = 0; r < runs; ++r) {
    for (Mode& m : modes) {
      m.samples.push_back(Spawn(m.argv));
      const Sample& s = m.samples.back();
      std::cerr << absl::StrFormat("run %d %s: %s wall %.2f s, cpu %.2f s, rss %.1f MiB\n", r,
                                   m.name, s.ok ? "ok" : "FAILED", s.wall_s, s.cpu_s, s.rss_mib);
    }
  }
  const auto med = [](const Mode& m, double Sample::*field) {
    std::vector<double> v;
    for (const Sample& s : m.samples) v.push_back(s.*field);
    return Median(v);
  };
  const double zcat_cpu = med(modes[0], &Sample::cpu_s);
  std::cout << "| what (" << files.size() << " files, medians of " << runs
            << ") | wall (s) | CPU (s) | CPU / zcat's | peak RSS (MiB) |\n|---|---|---|---|---|\n";
  for (const Mode& m : modes) {
    std::cout << absl::StrFormat("| %s | %.2f | %.2f | %.2f | %.1f |\n", m.name,
                                 med(m, &Sample::wall_s), med(m, &Sample::cpu_s),
                                 med(m, &Sample::cpu_s) / zcat_cpu, med(m, &Sample::rss_mib));
  }
  return 0;
}

}  // namespace
}  // namespace profctl::bench

int main(int argc, char** argv) { return profctl::bench::Main(argc, argv); }

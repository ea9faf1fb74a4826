// Reading this process's memory counters for whole-system benchmarks (analyze_benchmark,
// grpc_floor_benchmark).
#ifndef PROFCTL_BENCH_PROC_STATUS_H_
#define PROFCTL_BENCH_PROC_STATUS_H_

#include <cstdint>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"

namespace profctl::bench {

// A field of /proc/self/status given in kB ("VmRSS:", "VmHWM:"), in bytes; 0 when absent.
inline int64_t ProcStatusBytes(absl::string_view key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, key)) {
      int64_t kib = 0;
      std::string digits;
      for (char c : line) {
        if (c >= '0' && c <= '9') digits.push_back(c);
      }
      if (absl::SimpleAtoi(digits, &kib)) return kib * 1024;
    }
  }
  return 0;
}

}  // namespace profctl::bench

#endif  // PROFCTL_BENCH_PROC_STATUS_H_

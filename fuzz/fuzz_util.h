// Helpers shared by the fuzzers.
#ifndef PROFCTL_FUZZ_FUZZ_UTIL_H_
#define PROFCTL_FUZZ_FUZZ_UTIL_H_

#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace profctl::fuzz {

// abort() (a crash libFuzzer reports, with the input) unless `ok`.
inline void Check(bool ok) {
  if (!ok) std::abort();
}

// A folder of this process's own for files a parser must read from disk, on tmpfs when there is
// one; removed when the process exits.
inline const std::string& ScratchDir() {
  static const std::string* const kDir = [] {
    std::string templ =
        access("/dev/shm", W_OK) == 0 ? "/dev/shm/profctl_fuzz.XXXXXX" : "/tmp/profctl_fuzz.XXXXXX";
    Check(mkdtemp(templ.data()) != nullptr);
    auto* dir = new std::string(templ);
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(ScratchDir(), ignored);
    });
    return dir;
  }();
  return *kDir;
}

}  // namespace profctl::fuzz

#endif  // PROFCTL_FUZZ_FUZZ_UTIL_H_

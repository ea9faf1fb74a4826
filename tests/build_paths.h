// Where a test or benchmark finds the source tree and the programs the build made. They are read
// at run time from BUILD_DIR/profctl_test_paths.txt (key=path lines, written by the top-level
// CMakeLists.txt), found by walking up from the running binary. Not compile definitions: an
// absolute path compiled in made every test object depend on where the clone sits, and a clone
// at another path missed ccache for each of them (docs/ci.md).
#ifndef PROFCTL_TESTS_BUILD_PATHS_H_
#define PROFCTL_TESTS_BUILD_PATHS_H_

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace profctl::test_paths {

inline constexpr char kPathsFile[] = "profctl_test_paths.txt";

namespace internal {

// The first profctl_test_paths.txt in the folder of /proc/self/exe or one above it, read once.
inline const std::map<std::string, std::string, std::less<>>& Paths() {
  static const auto* const paths = [] {
    auto* out = new std::map<std::string, std::string, std::less<>>;
    std::error_code error;
    const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", error);
    for (std::filesystem::path dir = exe.parent_path(); !error && !dir.empty();
         dir = dir.parent_path()) {
      std::ifstream in(dir / kPathsFile);
      if (in) {
        std::string line;
        while (std::getline(in, line)) {
          const size_t eq = line.find('=');
          if (eq != std::string::npos) (*out)[line.substr(0, eq)] = line.substr(eq + 1);
        }
        return out;
      }
      if (dir == dir.root_path()) break;
    }
    if (error) {
      std::fprintf(stderr, "tests/build_paths.h: cannot read /proc/self/exe: %s\n",
                   error.message().c_str());
    } else {
      std::fprintf(stderr,
                   "tests/build_paths.h: no %s in the folder of %s or above it (run the "
                   "test from its build folder)\n",
                   kPathsFile, exe.c_str());
    }
    std::abort();
  }();
  return *paths;
}

}  // namespace internal

// The path profctl_test_paths.txt gives for `key`; aborts, naming the key, when it has none.
inline std::string PathOf(absl::string_view key) {
  const auto& paths = internal::Paths();
  const auto it = paths.find(key);
  if (it == paths.end()) {
    std::fprintf(stderr, "tests/build_paths.h: %s names no '%.*s' (this build does not make it)\n",
                 kPathsFile, static_cast<int>(key.size()), key.data());
    std::abort();
  }
  return it->second;
}

// A file or folder of the source tree, by its path relative to the repository root.
inline std::string SourcePath(absl::string_view relative) {
  return absl::StrCat(PathOf("source_dir"), "/", relative);
}

// The programs and library the build made.
inline std::string CliBinary() { return PathOf("profctl"); }
inline std::string AgentBinary() { return PathOf("profctl-agent"); }
inline std::string InjectLibrary() { return PathOf("profctl_inject"); }

}  // namespace profctl::test_paths

#endif  // PROFCTL_TESTS_BUILD_PATHS_H_

// Replays every committed input of every fuzz target (fuzz/corpus/TARGET/*) through the target's
// own entry point, in the test build (g++, ASan and UBSan): a crash, a sanitizer report or a
// failed fuzz::Check fails the test and names the input. The targets are fuzz/*_fuzzer.cc,
// compiled with LLVMFuzzerTestOneInput renamed to ProfctlFuzz_TARGET_TestOneInput (and
// LLVMFuzzerInitialize to ProfctlFuzz_TARGET_Initialize; fuzz/CMakeLists.txt). Fuzzing itself is
// `./dev fuzz` (docs/fuzzing.md).
#include <sanitizer/common_interface_defs.h>

#include <algorithm>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <ostream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/build_paths.h"

#define PROFCTL_FUZZ_TARGET(name)                                                     \
  extern "C" int ProfctlFuzz_##name##_TestOneInput(const uint8_t* data, size_t size); \
  extern "C" int ProfctlFuzz_##name##_Initialize(int* argc, char*** argv) __attribute__((weak));
#include "fuzz_targets.inc"
#undef PROFCTL_FUZZ_TARGET

namespace profctl::fuzz {
namespace {

struct FuzzTarget {
  const char* name;
  int (*test_one_input)(const uint8_t* data, size_t size);
  int (*initialize)(int* argc, char*** argv);  // null when the target has none
};

const FuzzTarget kTargets[] = {
#define PROFCTL_FUZZ_TARGET(name) \
  {#name, &ProfctlFuzz_##name##_TestOneInput, &ProfctlFuzz_##name##_Initialize},
#include "fuzz_targets.inc"
#undef PROFCTL_FUZZ_TARGET
};

// The input being replayed, for the crash message (a fixed buffer: read in a signal handler).
char current_input[4096];

void SayWhichInput() {
  if (current_input[0] != '\0') {
    std::fprintf(stderr, "\nfuzz corpus replay: crashed on %s\n", current_input);
  }
}

extern "C" void OnAbort(int sig) {
  SayWhichInput();
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

// Runs every file of `dir` (sorted) through `target`; returns how many. A crash ends the process
// after naming the file.
int Replay(const FuzzTarget& target, const std::string& dir) {
  std::vector<std::filesystem::path> inputs;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.is_regular_file()) inputs.push_back(entry.path());
  }
  std::sort(inputs.begin(), inputs.end());
  __sanitizer_set_death_callback(&SayWhichInput);
  std::signal(SIGABRT, &OnAbort);
  if (target.initialize != nullptr) {
    int argc = 1;
    char arg0[] = "fuzz_corpus_test";
    char* argv_storage[] = {arg0, nullptr};
    char** argv = argv_storage;
    target.initialize(&argc, &argv);
  }
  for (const std::filesystem::path& path : inputs) {
    std::ifstream in(path, std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                  std::istreambuf_iterator<char>());
    std::snprintf(current_input, sizeof(current_input), "%s", path.c_str());
    target.test_one_input(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  current_input[0] = '\0';
  std::signal(SIGABRT, SIG_DFL);
  return static_cast<int>(inputs.size());
}

// The target's name in test names and messages.
void PrintTo(const FuzzTarget& target, std::ostream* os) { *os << target.name; }

class FuzzCorpusTest : public ::testing::TestWithParam<FuzzTarget> {};

TEST_P(FuzzCorpusTest, EveryCommittedInputRunsWithoutACrash) {
  const std::string dir = test_paths::SourcePath("fuzz/corpus/") + GetParam().name;
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir << " is missing";
  EXPECT_GT(Replay(GetParam(), dir), 0) << dir << " holds no input";
}

INSTANTIATE_TEST_SUITE_P(Targets, FuzzCorpusTest, ::testing::ValuesIn(kTargets),
                         [](const ::testing::TestParamInfo<FuzzTarget>& target) {
                           return std::string(target.param.name);
                         });

// Every fuzz/corpus/ folder belongs to a target, so none is silently left out of the replay.
TEST(FuzzCorpusTest, EveryCorpusFolderHasATarget) {
  for (const auto& entry :
       std::filesystem::directory_iterator(test_paths::SourcePath("fuzz/corpus"))) {
    const std::string name = entry.path().filename().string();
    EXPECT_TRUE(std::any_of(std::begin(kTargets), std::end(kTargets),
                            [&](const FuzzTarget& t) { return name == t.name; }))
        << "fuzz/corpus/" << name << " has no fuzz/" << name << "_fuzzer.cc";
  }
}

// A target that crashes on an input fails the replay, and the message names that input.
TEST(FuzzCorpusDeathTest, ACrashNamesTheInput) {
  const std::string dir = ::testing::TempDir() + "/fuzz_corpus_death";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/harmless") << "a";
  std::ofstream(dir + "/the-bad-one") << "boom";
  const FuzzTarget crashes_on_boom = {"crashes_on_boom",
                                      [](const uint8_t* data, size_t size) {
                                        if (size == 4 && data[0] == 'b') std::abort();
                                        return 0;
                                      },
                                      nullptr};
  EXPECT_DEATH(Replay(crashes_on_boom, dir), "crashed on .*/the-bad-one");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace profctl::fuzz

#include "tests/build_paths.h"

#include <unistd.h>

#include <filesystem>
#include <string>

#include "gtest/gtest.h"
#include "tests/trace_data.h"

namespace profctl::test_paths {
namespace {

TEST(BuildPathsTest, TheSourceTreeAndTheBuiltProgramsAreFoundFromTheRunningBinary) {
  EXPECT_TRUE(std::filesystem::is_regular_file(SourcePath("cmake/ProfctlUnity.cmake")))
      << SourcePath("cmake/ProfctlUnity.cmake");
  EXPECT_TRUE(std::filesystem::is_regular_file(test_data::DataPath("rank3.pt.trace.json")));
  for (const std::string& program : {CliBinary(), AgentBinary()}) {
    EXPECT_EQ(access(program.c_str(), X_OK), 0) << program;
  }
}

TEST(BuildPathsDeathTest, AKeyTheBuildDoesNotWriteIsNamed) {
  EXPECT_DEATH(PathOf("no-such-program"), "names no 'no-such-program'");
}

}  // namespace
}  // namespace profctl::test_paths

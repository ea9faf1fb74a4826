#include "common/process_setup.h"

#include <cstdio>
#include <string>

#include "gtest/gtest.h"
#include "tests/build_paths.h"

namespace profctl {
namespace {

// The arenas glibc made for 8 threads allocating at once (malloc_arena_probe); -1 when the probe
// failed. The probe is built without sanitizers: this test binary's malloc may not be glibc's.
int ArenasOfProbe(const std::string& args) {
  // Without the environment's own arena settings, which would change the default.
  const std::string command = "env -u MALLOC_ARENA_MAX -u GLIBC_TUNABLES " +
                              test_paths::PathOf("malloc_arena_probe") + " " + args;
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return -1;
  int heaps = -1;
  if (std::fscanf(p, "%d", &heaps) != 1) heaps = -1;
  return pclose(p) == 0 ? heaps : -1;
}

TEST(ProcessSetupTest, LimitMallocArenasCapsTheArenasThreadsTake) {
  // Without the limit every thread that allocates takes an arena of its own (glibc allows 8 a
  // core), so the probe's 8 threads and main make more than two: the check below can fail.
  EXPECT_GT(ArenasOfProbe("default"), 2);
  EXPECT_EQ(ArenasOfProbe("limit 2"), 2);
  EXPECT_EQ(ArenasOfProbe("limit 1"), 1);
}

}  // namespace
}  // namespace profctl

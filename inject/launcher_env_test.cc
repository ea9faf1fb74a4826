#include "inject/launcher_env.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <map>
#include <optional>
#include <string>

namespace profctl::inject {
namespace {

using Env = std::map<std::string, std::string>;

const char* MapGetEnv(const char* name, void* context) {
  const Env& env = *static_cast<const Env*>(context);
  auto it = env.find(name);
  return it == env.end() ? nullptr : it->second.c_str();
}

RankInfo Detect(Env env) { return DetectRank(&MapGetEnv, &env); }

TEST(LauncherEnvTest, NothingSetIsUnknown) {
  const RankInfo info = Detect({});
  EXPECT_EQ(info.rank, -1);
  EXPECT_EQ(info.local_rank, -1);
  EXPECT_EQ(info.rank_source, "");
}

TEST(LauncherEnvTest, Torchrun) {
  const RankInfo info = Detect({{"RANK", "5"}, {"LOCAL_RANK", "1"}, {"WORLD_SIZE", "8"}});
  EXPECT_EQ(info.rank, 5);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.rank_source, "RANK");
}

TEST(LauncherEnvTest, OpenMpiSlurmPmiJax) {
  EXPECT_EQ(Detect({{"OMPI_COMM_WORLD_RANK", "7"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "3"}}).local_rank,
            3);
  const RankInfo slurm = Detect({{"SLURM_PROCID", "12"}, {"SLURM_LOCALID", "4"}});
  EXPECT_EQ(slurm.rank, 12);
  EXPECT_EQ(slurm.local_rank, 4);
  EXPECT_EQ(slurm.rank_source, "SLURM_PROCID");
  EXPECT_EQ(Detect({{"PMI_RANK", "2"}}).rank, 2);
  EXPECT_EQ(Detect({{"JAX_PROCESS_ID", "6"}}).rank, 6);
  EXPECT_EQ(Detect({{"MPI_LOCALRANKID", "2"}}).local_rank, 2);
}

TEST(LauncherEnvTest, TorchrunWinsOverTheSchedulerUnderIt) {
  const RankInfo info = Detect({{"RANK", "3"}, {"SLURM_PROCID", "0"}});
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.rank_source, "RANK");
}

TEST(LauncherEnvTest, BadValuesAreSkipped) {
  EXPECT_EQ(Detect({{"RANK", ""}}).rank, -1);
  EXPECT_EQ(Detect({{"RANK", "-1"}}).rank, -1);
  EXPECT_EQ(Detect({{"RANK", "3x"}}).rank, -1);
  EXPECT_EQ(Detect({{"RANK", "99999999999"}}).rank, -1);
  const RankInfo info = Detect({{"RANK", "abc"}, {"SLURM_PROCID", "9"}});
  EXPECT_EQ(info.rank, 9);
  EXPECT_EQ(info.rank_source, "SLURM_PROCID");
}

// Sets environment variables for one test and puts the old values back.
class ScopedEnv {
 public:
  explicit ScopedEnv(const std::map<std::string, std::string>& vars) {
    for (const auto& [name, value] : vars) {
      const char* old = getenv(name.c_str());
      saved_[name] = old != nullptr ? std::optional<std::string>(old) : std::nullopt;
      setenv(name.c_str(), value.c_str(), 1);
    }
  }
  ~ScopedEnv() {
    for (const auto& [name, old] : saved_) {
      if (old) {
        setenv(name.c_str(), old->c_str(), 1);
      } else {
        unsetenv(name.c_str());
      }
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

TEST(LauncherEnvTest, RegistrationFromTheProcessEnvironment) {
  ScopedEnv env({{"RANK", "5"}, {"LOCAL_RANK", "1"}, {"CUDA_VISIBLE_DEVICES", "GPU-5f1c,3"}});
  const RegisterMessage m = RegistrationFromEnvironment(true, false);
  EXPECT_EQ(m.pid, static_cast<uint32_t>(getpid()));
  EXPECT_EQ(m.rank, 5);
  EXPECT_EQ(m.local_rank, 1);
  EXPECT_STREQ(m.rank_source, "RANK");
  EXPECT_STREQ(m.visible_devices, "GPU-5f1c,3");
  EXPECT_EQ(m.flags, kRegisterFlagCuptiLoaded);
  EXPECT_EQ(RegistrationFromEnvironment(false, true).flags, kRegisterFlagNvtx);
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof(host) - 1), 0);
  EXPECT_STREQ(m.hostname, host);
  EXPECT_STRNE(m.process_name, "");  // /proc/self/comm: this test binary
}

TEST(LauncherEnvTest, RegistrationWithNoLauncher) {
  ScopedEnv env({{"RANK", ""}, {"LOCAL_RANK", "x"}, {"CUDA_VISIBLE_DEVICES", ""}});
  unsetenv("CUDA_VISIBLE_DEVICES");  // unset, not empty (put back at the end)
  const RegisterMessage m = RegistrationFromEnvironment(false, false);
  EXPECT_EQ(m.local_rank, -1);
  EXPECT_STREQ(m.visible_devices, "");
  EXPECT_EQ(m.flags, 0u);
}

}  // namespace
}  // namespace profctl::inject

#include "inject/launcher_env.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace profctl::inject {
namespace {

constexpr const char* kRankVariables[] = {"RANK",      "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                          "PMIX_RANK", "SLURM_PROCID",         "JAX_PROCESS_ID",
                                          "PMI_ID"};
constexpr const char* kLocalRankVariables[] = {"LOCAL_RANK",      "OMPI_COMM_WORLD_LOCAL_RANK",
                                               "MPI_LOCALRANKID", "PMI_LOCAL_RANK",
                                               "SLURM_LOCALID",   "JAX_LOCAL_PROCESS_ID"};

// A decimal integer in [0, 2^31), else -1.
int ParseRank(const char* text) {
  if (text == nullptr || *text == '\0') return -1;
  long long value = 0;
  for (const char* p = text; *p != '\0'; ++p) {
    if (*p < '0' || *p > '9') return -1;
    value = value * 10 + (*p - '0');
    if (value > 0x7FFFFFFF) return -1;
  }
  return static_cast<int>(value);
}

const char* RealGetEnv(const char* name, void* /*context*/) { return std::getenv(name); }

void ReadProcessName(char (&out)[64]) {
  FILE* f = std::fopen("/proc/self/comm", "re");
  if (f == nullptr) return;
  char buf[64] = {};
  if (std::fgets(buf, sizeof(buf), f) != nullptr) {
    buf[strcspn(buf, "\n")] = '\0';
    SetText(out, buf);
  }
  std::fclose(f);
}

}  // namespace

RankInfo DetectRank(GetEnvFn getenv_fn, void* context) {
  RankInfo info;
  for (const char* name : kRankVariables) {
    const int rank = ParseRank(getenv_fn(name, context));
    if (rank >= 0) {
      info.rank = rank;
      info.rank_source = name;
      break;
    }
  }
  for (const char* name : kLocalRankVariables) {
    const int rank = ParseRank(getenv_fn(name, context));
    if (rank >= 0) {
      info.local_rank = rank;
      break;
    }
  }
  return info;
}

RankInfo DetectRankFromEnvironment() { return DetectRank(&RealGetEnv, nullptr); }

RegisterMessage RegistrationFromEnvironment(bool cupti_loaded, bool nvtx) {
  RegisterMessage m;
  m.pid = static_cast<uint32_t>(getpid());
  const RankInfo rank = DetectRankFromEnvironment();
  m.rank = rank.rank;
  m.local_rank = rank.local_rank;
  SetText(m.rank_source, rank.rank_source);
  m.flags = (cupti_loaded ? kRegisterFlagCuptiLoaded : 0) | (nvtx ? kRegisterFlagNvtx : 0);
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) == 0) SetText(m.hostname, host);
  if (const char* devices = std::getenv("CUDA_VISIBLE_DEVICES"); devices != nullptr) {
    SetText(m.visible_devices, devices);
  }
  ReadProcessName(m.process_name);
  return m;
}

}  // namespace profctl::inject

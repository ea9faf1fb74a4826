#include "inject/launcher_env.h"

#include <cstdlib>

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

}  // namespace profctl::inject

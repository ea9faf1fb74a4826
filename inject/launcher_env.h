// Which rank a CUDA process is, from the variables common launchers set. Plain C++ and libc only:
// part of the injection library.
#ifndef PROFCTL_INJECT_LAUNCHER_ENV_H_
#define PROFCTL_INJECT_LAUNCHER_ENV_H_

#include <string>

#include "inject/socket_protocol.h"

namespace profctl::inject {

struct RankInfo {
  int rank = -1;            // -1: unknown
  int local_rank = -1;      // -1: unknown
  std::string rank_source;  // the variable `rank` came from, "" when unknown
};

// Looks a variable up: its value, or nullptr when unset (getenv in the library, a map in tests).
using GetEnvFn = const char* (*)(const char* name, void* context);

// The first variable set to a non-negative integer wins, in this order:
//   rank:       RANK (torchrun, JAX/TF's own launchers), OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK,
//               SLURM_PROCID, JAX_PROCESS_ID (jax.distributed's env), PMI_ID
//   local rank: LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, PMI_LOCAL_RANK,
//               SLURM_LOCALID, JAX_LOCAL_PROCESS_ID
// Values that are not integers in [0, 2^31) are skipped.
RankInfo DetectRank(GetEnvFn getenv_fn, void* context);

// DetectRank over the process's environment.
RankInfo DetectRankFromEnvironment();

// This process's Register message: pid, hostname, ranks (DetectRankFromEnvironment),
// CUDA_VISIBLE_DEVICES, /proc/self/comm, and the flags (kRegisterFlagCuptiLoaded,
// kRegisterFlagNvtx).
RegisterMessage RegistrationFromEnvironment(bool cupti_loaded, bool nvtx);

}  // namespace profctl::inject

#endif  // PROFCTL_INJECT_LAUNCHER_ENV_H_

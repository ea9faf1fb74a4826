#include "coordinator/local_agents.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/file_util.h"

extern char** environ;

namespace profctl::coordinator {
namespace {
constexpr int64_t kAgentStartTimeoutMs = 20'000;
constexpr int64_t kPollMs = 20;
}  // namespace

absl::Status LocalAgents::Spawn(const std::string& binary, const std::vector<std::string>& args) {
  const std::string log = JoinPath(scratch_, absl::StrCat("agent-", pids_.size(), ".log"));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  std::vector<std::string> argv_storage = {binary};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  argv.reserve(argv_storage.size() + 1);
  for (std::string& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  // The child starts with no signals blocked or ignored, whatever this process does with them.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, binary.c_str(), &actions, &attr, argv.data(), environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    return absl::InternalError(absl::StrCat("cannot start ", binary, ": ", std::strerror(rc)));
  }
  pids_.push_back(pid);
  logs_.push_back(log);
  return absl::OkStatus();
}

absl::StatusOr<int> LocalAgents::WaitForPort(size_t i, const std::string& port_file,
                                             const Clock& clock) {
  const int64_t deadline = clock.MonoNs() + kAgentStartTimeoutMs * kNanosPerMilli;
  StopSignal never;
  while (clock.MonoNs() < deadline) {
    if (absl::StatusOr<std::string> text = ReadFile(port_file); text.ok()) {
      int port = 0;
      if (absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &port) && port > 0) return port;
    }
    int status = 0;
    if (pids_[i] > 0 && waitpid(pids_[i], &status, WNOHANG) == pids_[i]) {
      pids_[i] = -1;
      return absl::UnavailableError(
          absl::StrCat("agent ", i, " exited before listening; its log: ", logs_[i]));
    }
    clock.WaitUntil(clock.MonoNs() + kPollMs * kNanosPerMilli, never);
  }
  return absl::DeadlineExceededError(absl::StrCat("agent ", i, " did not start listening within ",
                                                  kAgentStartTimeoutMs,
                                                  " ms; its log: ", logs_[i]));
}

void LocalAgents::StopAll() {
  for (pid_t pid : pids_) {
    if (pid > 0) kill(pid, SIGTERM);
  }
  for (pid_t& pid : pids_) {
    if (pid > 0) waitpid(pid, nullptr, 0);
    pid = -1;
  }
}

}  // namespace profctl::coordinator

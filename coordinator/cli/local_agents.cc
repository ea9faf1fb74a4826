#include "coordinator/cli/local_agents.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/file_util.h"
#include "common/port_file.h"

extern char** environ;

namespace profctl::coordinator {
namespace {
constexpr int64_t kAgentStartTimeoutMs = 20'000;
constexpr int64_t kPollMs = 20;
}  // namespace

absl::StatusOr<std::vector<int>> ReadPortFileAll(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return absl::NotFoundError(text.status().message());
  absl::StatusOr<PortFile> file = ParsePortFile(*text);
  if (!file.ok()) {
    return absl::Status(file.status().code(), absl::StrCat(path, ": ", file.status().message()));
  }
  return file->ports;
}

absl::StatusOr<int> ReadPortFile(const std::string& path) {
  absl::StatusOr<std::vector<int>> ports = ReadPortFileAll(path);
  if (!ports.ok()) return ports.status();
  return ports->front();
}

absl::Status LocalAgents::Spawn(const std::string& binary, const std::vector<std::string>& args) {
  const std::string log = JoinPath(scratch_, absl::StrCat("agent-", pids_.size(), ".log"));
  std::vector<std::string> argv_storage = {binary};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  argv.reserve(argv_storage.size() + 1);
  for (std::string& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  // The child reports a failure before exec as an errno on this close-on-exec pipe; a successful
  // exec closes it empty.
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot start ", binary, ": pipe: ", std::strerror(errno)));
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    close(report[0]);
    close(report[1]);
    return absl::InternalError(
        absl::StrCat("cannot start ", binary, ": fork: ", std::strerror(err)));
  }
  if (pid == 0) {
    // Child: async-signal-safe calls only. Its own process group keeps a terminal's Ctrl-C for
    // the parent, which cancels the capture in order and then stops the agents; PDEATHSIG stops
    // the agent if the parent dies without doing so (even by SIGKILL).
    auto fail = [&](int err) {
      (void)!write(report[1], &err, sizeof(err));
      _exit(127);
    };
    setpgid(0, 0);
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0) fail(errno);
    if (getppid() != parent) _exit(0);  // the parent is already gone
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) fail(errno);
    if (dup2(fd, STDOUT_FILENO) < 0 || dup2(fd, STDERR_FILENO) < 0) fail(errno);
    // The agent starts with no signals blocked or ignored, whatever this process does with them.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    execve(binary.c_str(), argv.data(), environ);
    fail(errno);
  }
  close(report[1]);
  int child_errno = 0;
  ssize_t n = 0;
  do {
    n = read(report[0], &child_errno, sizeof(child_errno));
  } while (n < 0 && errno == EINTR);
  close(report[0]);
  if (n == static_cast<ssize_t>(sizeof(child_errno))) {
    waitpid(pid, nullptr, 0);
    return absl::InternalError(
        absl::StrCat("cannot start ", binary, ": ", std::strerror(child_errno)));
  }
  pids_.push_back(pid);
  logs_.push_back(log);
  return absl::OkStatus();
}

absl::StatusOr<int> LocalAgents::WaitForPort(size_t i, const std::string& port_file,
                                             const Clock& clock, const StopSignal* stop) {
  absl::StatusOr<std::vector<int>> ports = WaitForPorts(i, port_file, clock, stop);
  if (!ports.ok()) return ports.status();
  return ports->front();
}

absl::StatusOr<std::vector<int>> LocalAgents::WaitForPorts(size_t i, const std::string& port_file,
                                                           const Clock& clock,
                                                           const StopSignal* stop) {
  const int64_t deadline = clock.MonoNs() + kAgentStartTimeoutMs * kNanosPerMilli;
  StopSignal never;
  const StopSignal& interrupt = stop != nullptr ? *stop : never;
  while (clock.MonoNs() < deadline) {
    if (absl::StatusOr<std::vector<int>> ports = ReadPortFileAll(port_file); ports.ok()) {
      return ports;
    } else if (ports.status().code() != absl::StatusCode::kNotFound) {
      return ports.status();
    }
    int status = 0;
    if (pids_[i] > 0 && waitpid(pids_[i], &status, WNOHANG) == pids_[i]) {
      pids_[i] = -1;
      return absl::UnavailableError(
          absl::StrCat("agent ", i, " exited before listening; its log: ", logs_[i]));
    }
    if (!clock.WaitUntil(clock.MonoNs() + kPollMs * kNanosPerMilli, interrupt)) {
      return absl::CancelledError(absl::StrCat("interrupted while agent ", i, " was starting"));
    }
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

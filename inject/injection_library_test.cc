// dlopens the real libprofctl_inject.so into this process, which has no GPU and at first no agent:
// InitializeInjection must return at once, crash nothing and print at most one line; once a fake
// agent listens, the library registers, and a capture window fails open (no GPU: CUPTI refuses to
// enable) with the error reported to the agent.
#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "inject/fake_agent_socket.h"
#include "inject/inject_client.h"
#include "inject/socket_protocol.h"
#include "tests/build_paths.h"

namespace profctl::inject {
namespace {

constexpr int kTimeoutMs = 20'000;

int64_t MonoMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

TEST(InjectionLibraryTest, NoGpuNoAgentThenAFakeAgent) {
  char tmpl[] = "/tmp/profctl-inject-lib-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string sock = dir + "/agent.sock";
  const std::string err_path = dir + "/stderr.txt";
  setenv(kAgentSocketEnv, sock.c_str(), 1);
  setenv("RANK", "5", 1);
  setenv("LOCAL_RANK", "1", 1);

  // Found before stderr goes to a file: a build without the paths file says so in the log.
  const std::string library = test_paths::InjectLibrary();
  // Capture this process's stderr while the library runs.
  fflush(stderr);
  const int saved_err = dup(2);
  const int err_fd = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  ASSERT_GE(err_fd, 0);
  dup2(err_fd, 2);

  void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  using Entry = int (*)();
  auto init = reinterpret_cast<Entry>(dlsym(lib, "InitializeInjection"));
  ASSERT_NE(init, nullptr);
  EXPECT_EQ(dlsym(lib, "_ZN7profctl6inject11CuptiTracer3GetEv"), nullptr);  // hidden
  const int64_t before = MonoMs();
  EXPECT_EQ(init(), 1);
  EXPECT_EQ(init(), 1);  // idempotent
  EXPECT_LT(MonoMs() - before, 5'000) << "InitializeInjection must not block";

  // Now an agent appears; the library's thread finds it (backoff from 100 ms).
  FakeAgent agent(sock, kTimeoutMs);
  ASSERT_TRUE(agent.Accept());
  uint16_t type = 0;
  std::vector<uint8_t> payload;
  ASSERT_TRUE(agent.Read(&type, &payload));
  ASSERT_EQ(type, static_cast<uint16_t>(MessageType::kRegister));
  RegisterMessage reg;
  ASSERT_TRUE(DecodeMessage(payload.data(), payload.size(), &reg));
  EXPECT_EQ(reg.pid, static_cast<uint32_t>(getpid()));
  EXPECT_EQ(reg.rank, 5);
  EXPECT_EQ(reg.local_rank, 1);
  EXPECT_EQ(GetText(reg.rank_source), "RANK");

  // A window: without a GPU CUPTI cannot enable (or libcupti is absent): the library says so,
  // keeps serving, and a Flush still completes.
  EnableMessage enable;
  enable.token = 11;
  std::vector<uint8_t> out;
  AppendMessage(MessageType::kEnable, enable, &out);
  AppendMessage(MessageType::kDisable, CommandMessage{11}, &out);
  AppendMessage(MessageType::kFlush, CommandMessage{11}, &out);
  agent.SendRaw(out);
  bool flushed = false;
  std::vector<uint32_t> codes;
  while (!flushed && agent.Read(&type, &payload)) {
    if (type != static_cast<uint16_t>(MessageType::kStatus)) continue;
    StatusMessage s;
    ASSERT_TRUE(DecodeMessage(payload.data(), payload.size(), &s));
    codes.push_back(s.code);
    flushed = s.code == static_cast<uint32_t>(StatusCode::kFlushDone);
  }
  EXPECT_TRUE(flushed);
  ASSERT_FALSE(codes.empty());
  // No GPU here: kError (enable refused) or kUnavailable (no libcupti); kEnabled on a GPU host.
  EXPECT_NE(codes.front(), static_cast<uint32_t>(StatusCode::kDisabled));
  agent.Close();
  dlclose(lib);  // -z nodelete: the library stays mapped, its thread keeps running harmlessly

  fflush(stderr);
  dup2(saved_err, 2);
  close(saved_err);
  close(err_fd);
  std::ifstream in(err_path);
  std::stringstream text;
  text << in.rdbuf();
  int lines = 0;
  for (char c : text.str()) lines += c == '\n';
  EXPECT_LE(lines, 1) << text.str();
  std::cout << "first status " << codes.front() << "; stderr: " << text.str() << "\n";
  if (lines == 1) {
    EXPECT_EQ(text.str().rfind("profctl-inject: pid ", 0), 0u) << text.str();
  }
  unlink(err_path.c_str());
  unlink(sock.c_str());
  rmdir(dir.c_str());
}

}  // namespace
}  // namespace profctl::inject

// TLS, mutual TLS and bearer tokens over real loopback gRPC (docs/security.md): an in-process
// agent (AgentServer, as profctl-agent starts it) with certificates that `openssl` makes for each
// test, called through the coordinator's channels (CreateAgentChannel, GrpcAgentClient) and
// through raw stubs that send whatever metadata a test wants.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "agent/agent_options.h"
#include "agent/auth.h"
#include "agent/service/agent_server.h"
#include "common/clock.h"
#include "common/executor.h"
#include "coordinator/clients/agent_credentials.h"
#include "coordinator/clients/grpc_agent_client.h"
#include "coordinator/clients/worker.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "profctl/v1/agent.grpc.pb.h"
#include "tensorflow/profiler/profiler_service.grpc.pb.h"
#include "tests/status_matchers.h"
#include "tests/temp_dir.h"
#include "tests/test_certs.h"

using ::profctl::testkit::IsOk;

namespace profctl {
namespace {

using coordinator::AgentCredentialFlags;
using ::testing::HasSubstr;
using ::testing::Not;
using std::string_literals::operator""s;

// Bounds every call: far above any healthy run, so only a bug reaches it.
constexpr auto kCallTimeout = std::chrono::seconds(20);

class SecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(testkit::HaveOpenssl()) << "these tests need the openssl command: "
                                           "scripts/bootstrap.sh --test installs it";
    certs_ = testkit::MakeTestCerts(tmp_.path());
    ASSERT_FALSE(certs_.ca_cert.empty()) << "openssl could not make the test certificates";
  }

  // Starts an agent on 127.0.0.1 (a free port) with `options`' security settings.
  void StartAgent(agent::AgentOptions options) {
    options.port = 0;
    options.bind = "127.0.0.1";
    absl::StatusOr<std::unique_ptr<agent::AgentServer>> server = agent::AgentServer::Start(
        options, {.clock = &clock_, .executor = &executor_, .hostname = "machine"});
    ASSERT_THAT(server, IsOk());
    server_ = std::move(*server);
  }

  agent::AgentOptions TlsToken() const {
    agent::AgentOptions o;
    o.tls_cert = certs_.server_cert;
    o.tls_key = certs_.server_key;
    o.token_file = certs_.token_file;
    return o;
  }
  agent::AgentOptions MutualTls() const {
    agent::AgentOptions o;
    o.tls_cert = certs_.server_cert;
    o.tls_key = certs_.server_key;
    o.tls_ca = certs_.ca_cert;
    return o;
  }

  std::string Target(const std::string& host = "127.0.0.1") const {
    return absl::StrCat(host, ":", server_->ports().front());
  }

  // A channel as profctl makes it from these flags.
  std::shared_ptr<grpc::Channel> Channel(const AgentCredentialFlags& flags,
                                         const std::string& host = "127.0.0.1") {
    absl::StatusOr<std::shared_ptr<const coordinator::AgentCredentials>> credentials =
        coordinator::LoadAgentCredentials(flags);
    EXPECT_THAT(credentials, IsOk());
    return coordinator::CreateAgentChannel(Target(host),
                                           credentials.ok() ? credentials->get() : nullptr, {});
  }

  static void Bound(grpc::ClientContext* ctx) {
    ctx->set_deadline(std::chrono::system_clock::now() + kCallTimeout);
  }

  static grpc::Status GetInfo(const std::shared_ptr<grpc::Channel>& channel,
                              profctl::v1::GetInfoResponse* response = nullptr,
                              const std::string& authorization = "") {
    profctl::v1::GetInfoResponse ignored;
    grpc::ClientContext ctx;
    Bound(&ctx);
    if (!authorization.empty()) ctx.AddMetadata("authorization", authorization);
    return profctl::v1::AgentService::NewStub(channel)->GetInfo(
        &ctx, {}, response != nullptr ? response : &ignored);
  }

  // Every RPC of both services, each with `authorization` (none when empty); their statuses.
  std::vector<grpc::Status> CallEveryRpc(const std::string& authorization) {
    auto channel = Channel({.tls_ca = certs_.ca_cert});
    auto agent = profctl::v1::AgentService::NewStub(channel);
    auto tsl = tensorflow::ProfilerService::NewStub(channel);
    std::vector<grpc::Status> statuses;
    auto call = [&](const auto& rpc) {
      grpc::ClientContext ctx;
      Bound(&ctx);
      if (!authorization.empty()) ctx.AddMetadata("authorization", authorization);
      statuses.push_back(rpc(&ctx));
    };
    call([&](grpc::ClientContext* ctx) {
      profctl::v1::GetInfoResponse r;
      return agent->GetInfo(ctx, {}, &r);
    });
    call([&](grpc::ClientContext* ctx) {
      profctl::v1::SyncClockResponse r;
      return agent->SyncClock(ctx, {}, &r);
    });
    call([&](grpc::ClientContext* ctx) {
      profctl::v1::CaptureRequest request;
      request.set_session_id("s1");
      request.set_duration_ms(20);
      auto reader = agent->Capture(ctx, request);
      profctl::v1::CaptureChunk chunk;
      while (reader->Read(&chunk)) {
      }
      return reader->Finish();
    });
    call([&](grpc::ClientContext* ctx) {
      profctl::v1::CancelRequest request;
      request.set_session_id("s1");
      profctl::v1::CancelResponse r;
      return agent->Cancel(ctx, request, &r);
    });
    call([&](grpc::ClientContext* ctx) {
      tensorflow::ProfileRequest request;
      request.set_session_id("t1");
      request.set_duration_ms(20);
      request.mutable_opts()->set_version(1);
      request.mutable_opts()->set_duration_ms(20);
      tensorflow::ProfileResponse r;
      return tsl->Profile(ctx, request, &r);
    });
    call([&](grpc::ClientContext* ctx) {
      tensorflow::TerminateRequest request;
      request.set_session_id("t1");
      tensorflow::TerminateResponse r;
      return tsl->Terminate(ctx, request, &r);
    });
    call([&](grpc::ClientContext* ctx) {
      tensorflow::MonitorResponse r;
      return tsl->Monitor(ctx, {}, &r);
    });
    return statuses;
  }

  const testkit::TempDir tmp_;
  testkit::TestCerts certs_;
  RealClock clock_;
  AsioExecutor executor_{&clock_};
  std::unique_ptr<agent::AgentServer> server_;  // before the executor goes
};

TEST_F(SecurityTest, TlsWithTheRightTokenServesEveryRpcOfBothServices) {
  StartAgent(TlsToken());
  const std::vector<grpc::Status> s = CallEveryRpc("Bearer " + certs_.token);
  ASSERT_EQ(s.size(), 7u);
  for (const int i : {0, 1, 2, 4}) {
    const grpc::Status& st = s[static_cast<size_t>(i)];
    EXPECT_THAT(st, IsOk()) << i << ": " << st.error_message();
  }
  // Cancel and Terminate of a finished session, Monitor: past authentication, their own answer.
  for (const int i : {3, 5, 6}) {
    const grpc::Status& st = s[static_cast<size_t>(i)];
    EXPECT_NE(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << i;
    EXPECT_NE(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << i;
  }
  EXPECT_EQ(s[6].error_code(), grpc::StatusCode::UNIMPLEMENTED);
  // The scheme is case-insensitive (RFC 7235).
  profctl::v1::GetInfoResponse info;
  EXPECT_THAT(GetInfo(Channel({.tls_ca = certs_.ca_cert}), &info, "bearer " + certs_.token),
              IsOk());
  EXPECT_EQ(info.hostname(), "machine");
}

TEST_F(SecurityTest, AMissingTokenIsUnauthenticatedOnEveryRpcAndRevealsNothing) {
  StartAgent(TlsToken());
  for (const std::string& authorization :
       {std::string(), "Basic dXNlcjpwYXNz"s, absl::StrCat("Token ", certs_.token), "Bearer"s}) {
    const std::vector<grpc::Status> s = CallEveryRpc(authorization);
    ASSERT_EQ(s.size(), 7u);
    for (size_t i = 0; i < s.size(); ++i) {
      EXPECT_EQ(s[i].error_code(), grpc::StatusCode::UNAUTHENTICATED)
          << "'" << authorization << "' rpc " << i << ": " << s[i].error_message();
      EXPECT_EQ(s[i].error_message(), "this agent requires a bearer token (profctl --token-file)");
    }
  }
  // Nothing was recorded for the unauthenticated Capture and Profile.
  EXPECT_FALSE(server_->manager_for_testing(0).busy());
}

TEST_F(SecurityTest, AWrongTokenIsPermissionDeniedOnEveryRpcAndRevealsNothing) {
  StartAgent(TlsToken());
  for (const std::string& token :
       {"fedcba9876543210fedcba9876543210"s, certs_.token + "x", certs_.token.substr(1), "x"s}) {
    const std::vector<grpc::Status> s = CallEveryRpc("Bearer " + token);
    ASSERT_EQ(s.size(), 7u);
    for (size_t i = 0; i < s.size(); ++i) {
      EXPECT_EQ(s[i].error_code(), grpc::StatusCode::PERMISSION_DENIED) << token << " rpc " << i;
      EXPECT_EQ(s[i].error_message(), "wrong bearer token");
    }
  }
  // Two authorization entries, one of them right, are refused too.
  grpc::ClientContext ctx;
  Bound(&ctx);
  ctx.AddMetadata("authorization", "Bearer " + certs_.token);
  ctx.AddMetadata("authorization", "Bearer wrong-wrong-wrong-wrong");
  profctl::v1::GetInfoResponse r;
  EXPECT_EQ(profctl::v1::AgentService::NewStub(Channel({.tls_ca = certs_.ca_cert}))
                ->GetInfo(&ctx, {}, &r)
                .error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(r.version(), "");
}

TEST_F(SecurityTest, ProfctlsChannelSendsTheTokenFileOnEveryCall) {
  StartAgent(TlsToken());
  EXPECT_THAT(GetInfo(Channel({.tls_ca = certs_.ca_cert, .token_file = certs_.token_file})),
              IsOk());
  EXPECT_EQ(GetInfo(Channel({.tls_ca = certs_.ca_cert, .token_file = certs_.wrong_token_file}))
                .error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(GetInfo(Channel({.tls_ca = certs_.ca_cert})).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(SecurityTest, ATokenOverPlaintextIsCheckedToo) {
  agent::AgentOptions o;
  o.token_file = certs_.token_file;
  StartAgent(o);
  EXPECT_THAT(GetInfo(Channel({.token_file = certs_.token_file})), IsOk());
  EXPECT_EQ(GetInfo(Channel({.token_file = certs_.wrong_token_file})).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(GetInfo(Channel({})).error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(SecurityTest, ATlsAgentRefusesPlaintextAndUntrustedClientsRefuseIt) {
  agent::AgentOptions o;
  o.tls_cert = certs_.server_cert;
  o.tls_key = certs_.server_key;
  StartAgent(o);
  EXPECT_THAT(GetInfo(Channel({.tls_ca = certs_.ca_cert})), IsOk());
  // By name: the certificate names localhost too.
  EXPECT_THAT(GetInfo(Channel({.tls_ca = certs_.ca_cert}, "localhost")), IsOk());
  // Plaintext against TLS: no HTTP/2 ever starts.
  const grpc::Status plain = GetInfo(Channel({}));
  EXPECT_EQ(plain.error_code(), grpc::StatusCode::UNAVAILABLE) << plain.error_message();
  // A client that trusts another CA refuses the agent's certificate.
  const grpc::Status untrusted = GetInfo(Channel({.tls_ca = certs_.other_ca_cert}));
  EXPECT_EQ(untrusted.error_code(), grpc::StatusCode::UNAVAILABLE) << untrusted.error_message();
  // --tls-server-name: the certificate must carry that name.
  EXPECT_THAT(GetInfo(Channel({.tls_ca = certs_.ca_cert, .tls_server_name = "localhost"})), IsOk());
  EXPECT_EQ(
      GetInfo(Channel({.tls_ca = certs_.ca_cert, .tls_server_name = "gpu-node-9"})).error_code(),
      grpc::StatusCode::UNAVAILABLE);
}

TEST_F(SecurityTest, MutualTlsAdmitsOnlyClientsWithACertificateOfItsCa) {
  StartAgent(MutualTls());
  EXPECT_THAT(GetInfo(Channel({.tls_cert = certs_.client_cert,
                               .tls_key = certs_.client_key,
                               .tls_ca = certs_.ca_cert})),
              IsOk());
  const grpc::Status none = GetInfo(Channel({.tls_ca = certs_.ca_cert}));
  EXPECT_EQ(none.error_code(), grpc::StatusCode::UNAVAILABLE) << none.error_message();
  const grpc::Status other = GetInfo(Channel({.tls_cert = certs_.other_client_cert,
                                              .tls_key = certs_.other_client_key,
                                              .tls_ca = certs_.ca_cert}));
  EXPECT_EQ(other.error_code(), grpc::StatusCode::UNAVAILABLE) << other.error_message();
  EXPECT_EQ(GetInfo(Channel({})).error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(SecurityTest, TheCoordinatorsClientReportsAuthErrorsByCodeAndRpc) {
  StartAgent(TlsToken());
  absl::StatusOr<std::vector<coordinator::WorkerAddress>> workers =
      coordinator::ParseWorkerList(Target());
  ASSERT_THAT(workers, IsOk());
  auto info = [&](const AgentCredentialFlags& flags) {
    absl::StatusOr<std::shared_ptr<const coordinator::AgentCredentials>> credentials =
        coordinator::LoadAgentCredentials(flags);
    EXPECT_THAT(credentials, IsOk());
    coordinator::GrpcAgentClientFactory factory({.credentials = credentials.value_or(nullptr)});
    std::unique_ptr<coordinator::AgentClient> client = factory.Connect(workers->front());
    absl::Notification done;
    absl::StatusOr<coordinator::AgentInfo> result = absl::UnknownError("no answer");
    client->GetInfo(20'000, [&](absl::StatusOr<coordinator::AgentInfo> r) {
      result = std::move(r);
      done.Notify();
    });
    done.WaitForNotification();
    return result;
  };
  absl::StatusOr<coordinator::AgentInfo> ok =
      info({.tls_ca = certs_.ca_cert, .token_file = certs_.token_file});
  ASSERT_THAT(ok, IsOk());
  EXPECT_EQ(ok->hostname, "machine");
  absl::StatusOr<coordinator::AgentInfo> wrong =
      info({.tls_ca = certs_.ca_cert, .token_file = certs_.wrong_token_file});
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(wrong.status().message(), HasSubstr("GetInfo: wrong bearer token"));
  absl::StatusOr<coordinator::AgentInfo> missing = info({.tls_ca = certs_.ca_cert});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kUnauthenticated);
  absl::StatusOr<coordinator::AgentInfo> untrusted =
      info({.tls_ca = certs_.other_ca_cert, .token_file = certs_.token_file});
  EXPECT_FALSE(untrusted.ok());
  EXPECT_THAT(untrusted.status().message(), Not(HasSubstr("machine")));
}

TEST_F(SecurityTest, BadCredentialFilesFailTheAgentsStartNamingTheFlag) {
  agent::AgentOptions o = TlsToken();
  o.tls_key = certs_.client_key;  // not the certificate's key
  o.port = 0;
  absl::StatusOr<std::unique_ptr<agent::AgentServer>> server = agent::AgentServer::Start(
      o, {.clock = &clock_, .executor = &executor_, .hostname = "machine"});
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(server.status().message(), HasSubstr("is not the key of --tls-cert="));
}

}  // namespace
}  // namespace profctl

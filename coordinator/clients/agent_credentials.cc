#include "coordinator/clients/agent_credentials.h"

#include <grpcpp/support/client_interceptor.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/net/server_auth.h"
#include "common/status_macros.h"

namespace profctl::coordinator {
namespace {

// Adds "authorization: Bearer <token>" to a call's initial metadata.
class BearerTokenInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit BearerTokenInterceptor(std::shared_ptr<const std::string> header)
      : header_(std::move(header)) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace("authorization", *header_);
    }
    methods->Proceed();
  }

 private:
  const std::shared_ptr<const std::string> header_;
};

class BearerTokenInterceptorFactory final
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BearerTokenInterceptorFactory(const std::string& token)
      : header_(std::make_shared<const std::string>(absl::StrCat("Bearer ", token))) {}

  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* /*info*/) override {
    return new BearerTokenInterceptor(header_);  // gRPC owns it
  }

 private:
  const std::shared_ptr<const std::string> header_;
};

}  // namespace

void AddAgentCredentialFlags(FlagSet* fs, AgentCredentialFlags* flags) {
  fs->String("tls-ca", &flags->tls_ca,
             "PEM CA certificate(s) that verify the agents' certificates; turns TLS on (without "
             "it, --tls-cert turns TLS on and gRPC's default roots verify the agents)");
  fs->String("tls-cert", &flags->tls_cert,
             "PEM client certificate for agents that require one (--tls-ca on the agent); needs "
             "--tls-key");
  fs->String("tls-key", &flags->tls_key,
             "PEM private key of --tls-cert (not readable by others: chmod 600)");
  fs->String("tls-server-name", &flags->tls_server_name,
             "the name every agent's certificate must carry, instead of the host in --workers "
             "(for workers given by IP address whose certificates name a host)");
  fs->String("token-file", &flags->token_file,
             "file holding the agents' bearer token (not readable by others), sent on every call "
             "to a profctl-agent (never to grpc:// workers)");
  fs->Bool("insecure-token", &flags->insecure_token,
           "send --token-file's token without TLS to workers beyond loopback too (anyone on the "
           "path, or a rogue worker, can read and replay it); without it such a capture is "
           "refused");
  for (const char* f : {"tls-ca", "tls-cert", "tls-key", "tls-server-name", "token-file"}) {
    fs->RejectEmpty(f);
  }
}

absl::StatusOr<std::shared_ptr<const AgentCredentials>> LoadAgentCredentials(
    const AgentCredentialFlags& flags) {
  if (flags.tls_ca.empty() && flags.tls_cert.empty() && flags.tls_key.empty() &&
      flags.tls_server_name.empty() && flags.token_file.empty()) {
    if (flags.insecure_token) {
      return absl::InvalidArgumentError("--insecure-token means nothing without --token-file");
    }
    return nullptr;
  }
  auto credentials = std::make_shared<AgentCredentials>();
  PROFCTL_ASSIGN_OR_RETURN(
      credentials->material,
      LoadTlsMaterial({.cert = flags.tls_cert, .key = flags.tls_key, .ca = flags.tls_ca}));
  credentials->tls = !flags.tls_ca.empty() || !flags.tls_cert.empty();
  if (!flags.tls_server_name.empty() && !credentials->tls) {
    return absl::InvalidArgumentError("--tls-server-name needs TLS: give --tls-ca");
  }
  credentials->server_name = flags.tls_server_name;
  if (!flags.token_file.empty()) {
    PROFCTL_ASSIGN_OR_RETURN(credentials->token, LoadBearerToken(flags.token_file));
  }
  credentials->token_in_clear_beyond_loopback = flags.insecure_token;
  return std::shared_ptr<const AgentCredentials>(std::move(credentials));
}

std::vector<std::string> AgentCredentialWarnings(const AgentCredentials& credentials) {
  std::vector<std::string> warnings;
  if (!credentials.token.empty() && !credentials.tls) {
    warnings.emplace_back(
        "warning: --token-file without TLS (--tls-ca): the token and the traces travel in clear "
        "text");
  }
  return warnings;
}

bool SendsTokenTo(const AgentCredentials& credentials, const WorkerAddress& worker) {
  if (credentials.token.empty() || worker.protocol != WorkerAddress::Protocol::kAgent) {
    return false;
  }
  return credentials.tls || credentials.token_in_clear_beyond_loopback ||
         IsLoopbackBind(worker.host);
}

absl::Status CheckTokenDestinations(const AgentCredentials& credentials,
                                    const std::vector<WorkerAddress>& workers,
                                    std::vector<std::string>* warnings) {
  if (credentials.token.empty() || credentials.tls) return absl::OkStatus();
  std::vector<const WorkerAddress*> beyond;
  for (const WorkerAddress& w : workers) {
    if (w.protocol == WorkerAddress::Protocol::kAgent && !IsLoopbackBind(w.host)) {
      beyond.push_back(&w);
    }
  }
  if (beyond.empty()) return absl::OkStatus();
  const std::string more =
      beyond.size() > 1 ? absl::StrCat(" (and ", beyond.size() - 1, " more)") : "";
  if (!credentials.token_in_clear_beyond_loopback) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--token-file without TLS would send the bearer token in clear text to worker '",
        beyond.front()->address, "'", more,
        ", beyond loopback: whoever is on the path, or answers at that address, could replay it. "
        "Give --tls-ca (TLS), or --insecure-token to send it anyway"));
  }
  warnings->push_back(
      absl::StrCat("WARNING: --insecure-token: the bearer token goes in clear text to ",
                   beyond.size(), " worker(s) beyond loopback, '", beyond.front()->address, "'",
                   more, "; anyone on the path, or a rogue worker, can read and replay it"));
  return absl::OkStatus();
}

std::shared_ptr<grpc::Channel> CreateAgentChannel(const std::string& target,
                                                  const AgentCredentials* credentials,
                                                  const grpc::ChannelArguments& base_args) {
  grpc::ChannelArguments args = base_args;
  if (credentials == nullptr) {
    return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
  }
  std::shared_ptr<grpc::ChannelCredentials> channel_credentials;
  if (credentials->tls) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = credentials->material.ca_pem;
    ssl.pem_private_key = credentials->material.key_pem;
    ssl.pem_cert_chain = credentials->material.cert_pem;
    channel_credentials = grpc::SslCredentials(ssl);
    if (!credentials->server_name.empty()) {
      args.SetSslTargetNameOverride(credentials->server_name);
    }
  } else {
    channel_credentials = grpc::InsecureChannelCredentials();
  }
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
  if (!credentials->token.empty()) {
    interceptors.push_back(std::make_unique<BearerTokenInterceptorFactory>(credentials->token));
  }
  return grpc::experimental::CreateCustomChannelWithInterceptors(target, channel_credentials, args,
                                                                 std::move(interceptors));
}

}  // namespace profctl::coordinator

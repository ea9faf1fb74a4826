#include "coordinator/clients/agent_credentials.h"

#include <grpcpp/support/client_interceptor.h>

#include <utility>

#include "absl/strings/str_cat.h"
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
  for (const char* f : {"tls-ca", "tls-cert", "tls-key", "tls-server-name", "token-file"}) {
    fs->RejectEmpty(f);
  }
}

absl::StatusOr<std::shared_ptr<const AgentCredentials>> LoadAgentCredentials(
    const AgentCredentialFlags& flags) {
  if (flags.tls_ca.empty() && flags.tls_cert.empty() && flags.tls_key.empty() &&
      flags.tls_server_name.empty() && flags.token_file.empty()) {
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

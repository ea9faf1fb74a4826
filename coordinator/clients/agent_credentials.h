// How profctl reaches profctl-agents that require TLS, client certificates or a bearer token
// (docs/security.md): the --tls-cert, --tls-key, --tls-ca, --tls-server-name and --token-file
// flags of the commands that contact agents, and the gRPC channels they make.
//
// grpc:// workers (TensorFlow/JAX profiler servers, tsl_agent_client.h) never use these: those
// servers listen in plaintext and know no token.
#ifndef PROFCTL_COORDINATOR_CLIENTS_AGENT_CREDENTIALS_H_
#define PROFCTL_COORDINATOR_CLIENTS_AGENT_CREDENTIALS_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/flags.h"
#include "common/net/credential_files.h"
#include "coordinator/clients/worker.h"

namespace profctl::coordinator {

struct AgentCredentials {
  // TLS on every profctl-agent channel.
  bool tls = false;
  // ca_pem: the roots that verify agents' certificates (empty: gRPC's default roots);
  // cert_pem and key_pem: ours, for agents that require client certificates (mutual TLS).
  TlsMaterial material = {};
  // The name the agent's certificate must carry instead of the worker's host (workers given
  // by IP address whose certificates name hosts); empty: the worker's host.
  std::string server_name = {};
  // Sent as "authorization: Bearer <token>" on every call; empty: none. Without TLS it is sent
  // only to loopback workers unless token_in_clear_beyond_loopback (--insecure-token): anyone on
  // the path to another host, or a rogue worker listed by mistake, could read and replay it.
  std::string token = {};
  bool token_in_clear_beyond_loopback = false;
};

// The flags' values, as given.
struct AgentCredentialFlags {
  std::string tls_cert = {};
  std::string tls_key = {};
  std::string tls_ca = {};
  std::string tls_server_name = {};
  std::string token_file = {};
  bool insecure_token = false;
};

// Registers --tls-cert, --tls-key, --tls-ca, --tls-server-name, --token-file and
// --insecure-token on `fs`.
void AddAgentCredentialFlags(FlagSet* fs, AgentCredentialFlags* flags);

// Reads and checks the files (LoadTlsMaterial, LoadBearerToken). TLS is on when --tls-ca or
// --tls-cert is given. Null when no flag was given; INVALID_ARGUMENT naming the flag and file,
// or --tls-server-name without TLS.
absl::StatusOr<std::shared_ptr<const AgentCredentials>> LoadAgentCredentials(
    const AgentCredentialFlags& flags);

// What profctl prints as warnings about `credentials`: a token sent in clear text.
std::vector<std::string> AgentCredentialWarnings(const AgentCredentials& credentials);

// Whether the token may go to `worker`: with TLS, or to a loopback host (127.0.0.0/8, ::1,
// localhost), or with token_in_clear_beyond_loopback. grpc:// workers never get it.
bool SendsTokenTo(const AgentCredentials& credentials, const WorkerAddress& worker);

// Before a command contacts `workers`: FAILED_PRECONDITION naming the first worker beyond
// loopback that the token would reach in clear text (and how many more), unless --insecure-token
// was given; then `warnings` gets a loud line naming how many workers get it in clear text.
absl::Status CheckTokenDestinations(const AgentCredentials& credentials,
                                    const std::vector<WorkerAddress>& workers,
                                    std::vector<std::string>* warnings);

// A channel to the profctl-agent at `target` using `credentials` (null: plaintext, no token):
// TLS credentials and, with a token, an interceptor that adds it to every call's metadata.
std::shared_ptr<grpc::Channel> CreateAgentChannel(const std::string& target,
                                                  const AgentCredentials* credentials,
                                                  const grpc::ChannelArguments& args);

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_CLIENTS_AGENT_CREDENTIALS_H_

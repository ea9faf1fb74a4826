// Who may call profctl-agent (docs/security.md): TLS and mutual TLS on its port, a bearer token
// on every call of every service, and which addresses it may listen on without either.
//
// The token is checked by EndpointRouter::Route, which every handler of AgentService and
// tensorflow.ProfilerService calls before anything else. Not a grpc::AuthMetadataProcessor:
// gRPC 1.51 takes one only on TLS credentials (InsecureServerCredentials asserts), and a token
// over plaintext is a supported (warned) setup.
#ifndef PROFCTL_AGENT_AUTH_H_
#define PROFCTL_AGENT_AUTH_H_

#include <grpcpp/grpcpp.h>

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "agent/agent_options.h"
#include "common/net/server_auth.h"

namespace profctl::agent {

using ::profctl::CallAuthenticator;
using ::profctl::IsLoopbackBind;
using ::profctl::ServerSecurity;

// Whether callers must prove who they are: a bearer token, or client certificates (mutual TLS).
// TLS alone encrypts but lets any client in.
bool AuthenticatesClients(const AgentOptions& options);

// Reads and checks the --tls-* and --token-file files (LoadTlsMaterial, LoadBearerToken):
// INVALID_ARGUMENT naming the flag and path.
absl::StatusOr<ServerSecurity> LoadServerSecurity(const AgentOptions& options);

// One line for the startup log: "TLS, client certificates, bearer token", "plaintext, no client
// authentication (loopback only)", ...
std::string SecuritySummary(const AgentOptions& options);

// What profctl-agent logs as warnings at startup about `options` (validated): serving
// unauthenticated on a non-loopback address (--insecure), a token travelling in clear text.
std::vector<std::string> SecurityWarnings(const AgentOptions& options);

}  // namespace profctl::agent

#endif  // PROFCTL_AGENT_AUTH_H_

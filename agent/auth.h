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

namespace profctl::agent {

// Checks each call's "authorization: Bearer <token>" metadata against the agent's token.
// Immutable, thread-safe.
class CallAuthenticator {
 public:
  // `token`: LoadBearerToken's (non-empty).
  explicit CallAuthenticator(absl::string_view token);

  // OK when the call carries exactly one "authorization" entry "Bearer <our token>" (scheme
  // case-insensitive). UNAUTHENTICATED when it carries none, more than one, or one of another
  // scheme; PERMISSION_DENIED when the token differs. The messages say only that. The
  // comparison takes the same time wherever the tokens differ (SHA-256 of both, CRYPTO_memcmp).
  absl::Status Check(const grpc::ServerContextBase& ctx) const;
  // The same on the call's authorization values.
  absl::Status CheckAuthorization(const std::vector<absl::string_view>& values) const;

 private:
  std::array<unsigned char, 32> token_sha256_ = {};
};

// Whether `bind` (--bind) listens on loopback only: 127.0.0.0/8, ::1 or "localhost".
bool IsLoopbackBind(absl::string_view bind);

// Whether callers must prove who they are: a bearer token, or client certificates (mutual TLS).
// TLS alone encrypts but lets any client in.
bool AuthenticatesClients(const AgentOptions& options);

// What the agent's port needs, from validated options.
struct ServerSecurity {
  // TLS (with client certificates required and verified when --tls-ca is given) or plaintext.
  std::shared_ptr<grpc::ServerCredentials> credentials;
  // Null: calls need no token.
  std::shared_ptr<const CallAuthenticator> authenticator;
};

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

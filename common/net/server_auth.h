// Who may call a profctl gRPC server (the agent's port, the coordinator daemon's): TLS and
// mutual TLS on the port, a bearer token on every call, and which addresses it may listen on
// without either (docs/security.md).
//
// The token is checked by each handler before anything else, not by a
// grpc::AuthMetadataProcessor: gRPC 1.51 takes one only on TLS credentials
// (InsecureServerCredentials asserts), and a token over plaintext is a supported (warned) setup.
#ifndef PROFCTL_COMMON_NET_SERVER_AUTH_H_
#define PROFCTL_COMMON_NET_SERVER_AUTH_H_

#include <grpcpp/grpcpp.h>

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace profctl {

// Checks each call's "authorization: Bearer <token>" metadata against the server's token.
// Immutable, thread-safe.
class CallAuthenticator {
 public:
  // `token`: LoadBearerToken's (non-empty). `server` names the server in the error for a call
  // without a token ("this agent", "this coordinator").
  explicit CallAuthenticator(absl::string_view token, std::string server = "this agent");

  // OK when the call carries exactly one "authorization" entry "Bearer <our token>" (scheme
  // case-insensitive). UNAUTHENTICATED when it carries none, more than one, or one of another
  // scheme; PERMISSION_DENIED when the token differs. The messages say only that. The
  // comparison takes the same time wherever the tokens differ (SHA-256 of both, CRYPTO_memcmp).
  absl::Status Check(const grpc::ServerContextBase& ctx) const;
  // The same on the call's authorization values.
  absl::Status CheckAuthorization(const std::vector<absl::string_view>& values) const;

 private:
  std::array<unsigned char, 32> token_sha256_ = {};
  std::string server_;
};

// Whether `bind` (--bind) listens on loopback only: 127.0.0.0/8, ::1 or "localhost".
bool IsLoopbackBind(absl::string_view bind);

// The files that secure a port: --tls-cert, --tls-key, --tls-ca (client certificates required
// and verified) and --token-file; empty = not given.
struct ServerSecurityFiles {
  std::string tls_cert = {};
  std::string tls_key = {};
  std::string tls_ca = {};
  std::string token_file = {};
};

// What a port needs.
struct ServerSecurity {
  // TLS (with client certificates required and verified when tls_ca is given) or plaintext.
  std::shared_ptr<grpc::ServerCredentials> credentials;
  // Null: calls need no token.
  std::shared_ptr<const CallAuthenticator> authenticator;
};

// Reads and checks the files (LoadTlsMaterial, LoadBearerToken): INVALID_ARGUMENT naming the
// flag and path. `server` as for CallAuthenticator.
absl::StatusOr<ServerSecurity> LoadServerSecurityFiles(const ServerSecurityFiles& files,
                                                       const std::string& server);

}  // namespace profctl

#endif  // PROFCTL_COMMON_NET_SERVER_AUTH_H_

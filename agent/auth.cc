#include "agent/auth.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace profctl::agent {

bool AuthenticatesClients(const AgentOptions& options) {
  return !options.token_file.empty() || !options.tls_ca.empty();
}

absl::StatusOr<ServerSecurity> LoadServerSecurity(const AgentOptions& options) {
  return LoadServerSecurityFiles({.tls_cert = options.tls_cert,
                                  .tls_key = options.tls_key,
                                  .tls_ca = options.tls_ca,
                                  .token_file = options.token_file},
                                 "this agent");
}

std::string SecuritySummary(const AgentOptions& options) {
  std::string out = options.tls_cert.empty() ? "plaintext" : "TLS";
  if (!options.tls_ca.empty()) absl::StrAppend(&out, ", client certificates of --tls-ca");
  if (!options.token_file.empty()) absl::StrAppend(&out, ", bearer token");
  if (!AuthenticatesClients(options)) {
    absl::StrAppend(&out, ", no client authentication",
                    IsLoopbackBind(options.bind) ? " (loopback only)" : " (--insecure)");
  }
  return out;
}

std::vector<std::string> SecurityWarnings(const AgentOptions& options) {
  std::vector<std::string> warnings;
  if (options.insecure && !IsLoopbackBind(options.bind)) {
    warnings.push_back(absl::StrCat(
        "--insecure: serving on ", options.bind, " with no client authentication",
        options.tls_cert.empty() ? " and no TLS" : "",
        ": anyone who reaches this port can run captures on this host and read its traces "
        "(docs/security.md)"));
  }
  if (!options.token_file.empty() && options.tls_cert.empty()) {
    warnings.push_back(
        "--token-file without --tls-cert: the token and the traces travel in clear text; "
        "anyone on the network path can read the token and reuse it (docs/security.md)");
  }
  return warnings;
}

}  // namespace profctl::agent

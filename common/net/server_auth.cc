#include "common/net/server_auth.h"

#include <arpa/inet.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/net/credential_files.h"
#include "common/status_macros.h"

namespace profctl {
namespace {

constexpr absl::string_view kBearer = "bearer ";

std::array<unsigned char, 32> Sha256(absl::string_view text) {
  std::array<unsigned char, 32> digest = {};
  unsigned int size = 0;
  EVP_Digest(text.data(), text.size(), digest.data(), &size, EVP_sha256(), nullptr);
  return digest;
}

}  // namespace

CallAuthenticator::CallAuthenticator(absl::string_view token, std::string server)
    : token_sha256_(Sha256(token)), server_(std::move(server)) {}

absl::Status CallAuthenticator::Check(const grpc::ServerContextBase& ctx) const {
  std::vector<absl::string_view> values;
  const auto range = ctx.client_metadata().equal_range("authorization");
  for (auto it = range.first; it != range.second; ++it) {
    values.emplace_back(it->second.data(), it->second.size());
  }
  return CheckAuthorization(values);
}

absl::Status CallAuthenticator::CheckAuthorization(
    const std::vector<absl::string_view>& values) const {
  if (values.size() != 1 || values.front().size() < kBearer.size() ||
      !absl::EqualsIgnoreCase(values.front().substr(0, kBearer.size()), kBearer)) {
    return absl::UnauthenticatedError(
        absl::StrCat(server_, " requires a bearer token (profctl --token-file)"));
  }
  const std::array<unsigned char, 32> given = Sha256(values.front().substr(kBearer.size()));
  if (CRYPTO_memcmp(given.data(), token_sha256_.data(), given.size()) != 0) {
    return absl::PermissionDeniedError("wrong bearer token");
  }
  return absl::OkStatus();
}

bool IsLoopbackBind(absl::string_view bind) {
  if (bind == "localhost") return true;
  std::string host(bind);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;
}

absl::StatusOr<ServerSecurity> LoadServerSecurityFiles(const ServerSecurityFiles& options,
                                                       const std::string& server) {
  ServerSecurity security;
  PROFCTL_ASSIGN_OR_RETURN(
      const TlsMaterial tls,
      LoadTlsMaterial({.cert = options.tls_cert, .key = options.tls_key, .ca = options.tls_ca}));
  if (tls.cert_pem.empty()) {
    security.credentials = grpc::InsecureServerCredentials();
  } else {
    grpc::SslServerCredentialsOptions ssl(
        tls.ca_pem.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                           : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    ssl.pem_root_certs = tls.ca_pem;
    ssl.pem_key_cert_pairs.push_back({tls.key_pem, tls.cert_pem});
    security.credentials = grpc::SslServerCredentials(ssl);
  }
  if (!options.token_file.empty()) {
    PROFCTL_ASSIGN_OR_RETURN(const std::string token, LoadBearerToken(options.token_file));
    security.authenticator = std::make_shared<const CallAuthenticator>(token, server);
  }
  return security;
}

}  // namespace profctl

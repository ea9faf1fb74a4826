// The files that secure profctl's gRPC endpoints (docs/security.md): TLS certificates and keys
// (PEM) and bearer-token files, read and checked once at startup by the agent and by profctl, so
// a bad file is reported by its flag and path instead of as a failed handshake later.
#ifndef PROFCTL_COMMON_NET_CREDENTIAL_FILES_H_
#define PROFCTL_COMMON_NET_CREDENTIAL_FILES_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

namespace profctl {

// Paths given with --tls-cert, --tls-key and --tls-ca; empty = not given.
struct TlsFilePaths {
  std::string cert = {};
  std::string key = {};
  std::string ca = {};
};

// PEM text of the files read; empty where no file was given.
struct TlsMaterial {
  std::string cert_pem = {};  // this side's certificate, then any intermediates
  std::string key_pem = {};   // its private key
  std::string ca_pem = {};    // the certificates that verify the peer
};

inline constexpr size_t kMinTokenChars = 16;
inline constexpr size_t kMaxTokenChars = 4096;

// Reads and checks the files of `paths` (INVALID_ARGUMENT naming the flag and path, e.g.
// "--tls-key=/etc/k.pem: ..."):
//   - --tls-cert and --tls-key are given together; the key is the certificate's; the
//     certificate has not expired;
//   - --tls-key, a secret, is not readable or writable by others (chmod 600 or 640);
//   - --tls-ca holds at least one certificate;
//   - each file is PEM that OpenSSL parses and at most 1 MiB.
absl::StatusOr<TlsMaterial> LoadTlsMaterial(const TlsFilePaths& paths);

// The bearer token in `path` (--token-file): its contents less one trailing "\n" or "\r\n".
// INVALID_ARGUMENT naming the file when it is readable or writable by others, empty, shorter
// than kMinTokenChars or longer than kMaxTokenChars, or holds anything but visible ASCII
// (0x21-0x7e: what an HTTP/2 header value carries unaltered).
absl::StatusOr<std::string> LoadBearerToken(const std::string& path);

}  // namespace profctl

#endif  // PROFCTL_COMMON_NET_CREDENTIAL_FILES_H_

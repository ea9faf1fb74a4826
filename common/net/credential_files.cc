#include "common/net/credential_files.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/stat.h>

#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/status_macros.h"

namespace profctl {
namespace {

constexpr size_t kMaxPemBytes = 1 << 20;

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;

// "--tls-key=/etc/k.pem: " for errors.
std::string Where(const char* flag, const std::string& path) {
  return absl::StrCat(flag, "=", path, ": ");
}

// Reads `path` (at most `max_bytes`); with `secret`, refuses a file others may read or write.
absl::StatusOr<std::string> ReadCredentialFile(const char* flag, const std::string& path,
                                               size_t max_bytes, bool secret) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    const int err = errno;
    return absl::InvalidArgumentError(absl::StrCat(Where(flag, path), strerror(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(Where(flag, path), "not a regular file"));
  }
  if (secret && (st.st_mode & (S_IROTH | S_IWOTH)) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(flag, path), "other users can ", (st.st_mode & S_IROTH) ? "read" : "",
                     (st.st_mode & (S_IROTH | S_IWOTH)) == (S_IROTH | S_IWOTH) ? " and " : "",
                     (st.st_mode & S_IWOTH) ? "write" : "",
                     " this secret; allow only its owner (and group): chmod 600 or 640"));
  }
  if (static_cast<size_t>(st.st_size) > max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(flag, path), st.st_size, " bytes is over the limit of ", max_bytes));
  }
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", text.status().message()));
  }
  if (text->size() > max_bytes) {  // it grew after stat
    return absl::InvalidArgumentError(
        absl::StrCat(Where(flag, path), "over the limit of ", max_bytes, " bytes"));
  }
  return text;
}

BioPtr MemBio(const std::string& text) {
  return BioPtr(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

// OpenSSL's reason for the last failure, and an empty error queue.
std::string OpenSslReason() {
  const unsigned long code = ERR_peek_last_error();  // NOLINT(google-runtime-int): OpenSSL's type
  std::string reason;
  if (code != 0) {
    const char* r = ERR_reason_error_string(code);
    if (r != nullptr) reason = absl::StrCat(" (", r, ")");
  }
  ERR_clear_error();
  return reason;
}

absl::StatusOr<X509Ptr> ParseFirstCertificate(const char* flag, const std::string& path,
                                              const std::string& pem) {
  BioPtr bio = MemBio(pem);
  X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (cert == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        Where(flag, path), "no PEM certificate (-----BEGIN CERTIFICATE-----)", OpenSslReason()));
  }
  return cert;
}

}  // namespace

absl::StatusOr<TlsMaterial> LoadTlsMaterial(const TlsFilePaths& paths) {
  TlsMaterial m;
  if (paths.cert.empty() != paths.key.empty()) {
    return absl::InvalidArgumentError(
        paths.cert.empty() ? "--tls-key is given without --tls-cert (give both, or neither)"
                           : "--tls-cert is given without --tls-key (give both, or neither)");
  }
  if (!paths.cert.empty()) {
    PROFCTL_ASSIGN_OR_RETURN(
        m.cert_pem, ReadCredentialFile("--tls-cert", paths.cert, kMaxPemBytes, /*secret=*/false));
    PROFCTL_ASSIGN_OR_RETURN(
        m.key_pem, ReadCredentialFile("--tls-key", paths.key, kMaxPemBytes, /*secret=*/true));
    PROFCTL_ASSIGN_OR_RETURN(X509Ptr cert,
                             ParseFirstCertificate("--tls-cert", paths.cert, m.cert_pem));
    BioPtr key_bio = MemBio(m.key_pem);
    PkeyPtr key(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
    if (key == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          Where("--tls-key", paths.key),
          "no unencrypted PEM private key (-----BEGIN PRIVATE KEY-----)", OpenSslReason()));
    }
    if (X509_check_private_key(cert.get(), key.get()) != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--tls-key=", paths.key, " is not the key of --tls-cert=", paths.cert, OpenSslReason()));
    }
    if (X509_cmp_current_time(X509_get0_notAfter(cert.get())) < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(Where("--tls-cert", paths.cert), "the certificate has expired"));
    }
  }
  if (!paths.ca.empty()) {
    PROFCTL_ASSIGN_OR_RETURN(
        m.ca_pem, ReadCredentialFile("--tls-ca", paths.ca, kMaxPemBytes, /*secret=*/false));
    PROFCTL_RETURN_IF_ERROR(ParseFirstCertificate("--tls-ca", paths.ca, m.ca_pem).status());
  }
  return m;
}

absl::StatusOr<std::string> LoadBearerToken(const std::string& path) {
  PROFCTL_ASSIGN_OR_RETURN(
      std::string token,
      ReadCredentialFile("--token-file", path, kMaxTokenChars + 2, /*secret=*/true));
  if (absl::EndsWith(token, "\n")) token.pop_back();
  if (absl::EndsWith(token, "\r")) token.pop_back();
  if (token.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(Where("--token-file", path), "empty"));
  }
  for (size_t i = 0; i < token.size(); ++i) {
    const auto c = static_cast<unsigned char>(token[i]);
    if (c < 0x21 || c > 0x7e) {
      return absl::InvalidArgumentError(absl::StrCat(Where("--token-file", path), "byte ", i,
                                                     " is not visible ASCII (0x21-0x7e); make a ",
                                                     "token with e.g. 'openssl rand -hex 32'"));
    }
  }
  if (token.size() < kMinTokenChars || token.size() > kMaxTokenChars) {
    return absl::InvalidArgumentError(absl::StrCat(
        Where("--token-file", path), "the token has ", token.size(), " characters; use ",
        kMinTokenChars, "..", kMaxTokenChars, " (e.g. 'openssl rand -hex 32')"));
  }
  return token;
}

}  // namespace profctl

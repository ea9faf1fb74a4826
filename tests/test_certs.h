// Certificates for TLS tests, made fresh by the `openssl` command in a test's own folder (never
// checked in, so none expires or leaks): a CA, a server certificate for 127.0.0.1 and localhost,
// a client certificate, and a second CA with a client certificate of its own (the wrong CA).
// Header-only; scripts/bootstrap.sh --test installs openssl.
#ifndef PROFCTL_TESTS_TEST_CERTS_H_
#define PROFCTL_TESTS_TEST_CERTS_H_

#include <sys/stat.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"

namespace profctl::testkit {

struct TestCerts {
  std::string ca_cert;                              // CA "profctl-test-ca"
  std::string server_cert, server_key;              // by ca_cert; SAN DNS:localhost, IP:127.0.0.1
  std::string client_cert, client_key;              // by ca_cert; clientAuth
  std::string other_ca_cert;                        // another CA, "profctl-other-ca"
  std::string other_client_cert, other_client_key;  // by other_ca_cert
  std::string token, token_file;                    // a bearer token and its file (mode 0600)
  std::string wrong_token_file;                     // another token (mode 0600)
};

// Whether an `openssl` command can be run.
inline bool HaveOpenssl() {
  return std::system("command -v openssl >/dev/null 2>&1") == 0;  // NOLINT(cert-env33-c)
}

// Makes the certificates and tokens under `dir` (an existing folder). Empty paths when openssl
// failed: a test then fails on its first use (TLS files that cannot be read are reported).
inline TestCerts MakeTestCerts(const std::string& dir) {
  TestCerts c;
  const std::string d = dir + "/";
  const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  (void)WriteFileAtomically(d + "server.ext",
                            "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                            "extendedKeyUsage=serverAuth\n");
  (void)WriteFileAtomically(d + "client.ext", "extendedKeyUsage=clientAuth\n");
  const std::string script = absl::StrCat(
      "cd '", dir, "' && ( set -e; ",
      // Two CAs.
      "openssl req -x509 ", ec, " -keyout ca.key -out ca.crt -days 2 -subj /CN=profctl-test-ca; ",
      "openssl req -x509 ", ec,
      " -keyout other-ca.key -out other-ca.crt -days 2 -subj /CN=profctl-other-ca; ",
      // Leaves: server and client by the CA, a client by the other CA.
      "for leaf in server:ca:server client:ca:client other-client:other-ca:client; do ",
      "  name=${leaf%%:*}; rest=${leaf#*:}; ca=${rest%%:*}; ext=${rest#*:}; ", "  openssl req ", ec,
      " -keyout $name.key -out $name.csr -subj /CN=$name; ",
      "  openssl x509 -req -in $name.csr -CA $ca.crt -CAkey $ca.key -CAcreateserial ",
      "    -out $name.crt -days 2 -extfile $ext.ext; ", "done; chmod 600 *.key ) >/dev/null 2>&1");
  if (std::system(script.c_str()) != 0) return c;  // NOLINT(cert-env33-c)
  c.ca_cert = d + "ca.crt";
  c.server_cert = d + "server.crt";
  c.server_key = d + "server.key";
  c.client_cert = d + "client.crt";
  c.client_key = d + "client.key";
  c.other_ca_cert = d + "other-ca.crt";
  c.other_client_cert = d + "other-client.crt";
  c.other_client_key = d + "other-client.key";
  c.token = "0123456789abcdef0123456789abcdef";
  c.token_file = d + "token";
  c.wrong_token_file = d + "wrong-token";
  (void)WriteFileAtomically(c.token_file, c.token + "\n");
  (void)WriteFileAtomically(c.wrong_token_file, "fedcba9876543210fedcba9876543210\n");
  chmod(c.token_file.c_str(), 0600);
  chmod(c.wrong_token_file.c_str(), 0600);
  return c;
}

}  // namespace profctl::testkit

#endif  // PROFCTL_TESTS_TEST_CERTS_H_

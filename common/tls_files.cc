#include "common/tls_files.h"

#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace metrics::common {

absl::StatusOr<std::string> ReadPemFile(absl::string_view flag,
                                        const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " ", path, ": cannot read (", std::strerror(errno), ")"));
  }
  std::ostringstream content;
  content << file.rdbuf();
  if (!absl::StrContains(content.str(), "-----BEGIN ")) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " ", path, ": not a PEM file (no BEGIN line)"));
  }
  return content.str();
}

namespace {

// That `cert_pem`'s first certificate and `key_pem` parse and belong
// together, checked before anything listens: gRPC would only say it cannot
// listen.
absl::Status CheckKeyPair(const std::string& cert_pem,
                          const std::string& key_pem) {
  BIO* cert_bio = BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size()));
  X509* cert = PEM_read_bio_X509(cert_bio, nullptr, nullptr, nullptr);
  BIO_free(cert_bio);
  BIO* key_bio = BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size()));
  EVP_PKEY* key = PEM_read_bio_PrivateKey(key_bio, nullptr, nullptr, nullptr);
  BIO_free(key_bio);
  absl::Status status;
  if (cert == nullptr) {
    status = absl::InvalidArgumentError(
        "--tls-cert: holds no PEM certificate that can be read");
  } else if (key == nullptr) {
    status = absl::InvalidArgumentError(
        "--tls-key: holds no unencrypted PEM private key that can be read");
  } else if (X509_check_private_key(cert, key) != 1) {
    status = absl::InvalidArgumentError(
        "--tls-key: does not match the certificate of --tls-cert");
  }
  X509_free(cert);
  EVP_PKEY_free(key);
  return status;
}

}  // namespace

absl::StatusOr<ServerTlsPem> ReadServerTls(const ServerTlsFiles& files) {
  ServerTlsPem pem;
  if (files.cert.empty() != files.key.empty()) {
    return absl::InvalidArgumentError(
        "--tls-cert and --tls-key: give both or neither");
  }
  if (files.cert.empty()) {
    if (!files.client_ca.empty()) {
      return absl::InvalidArgumentError(
          "--tls-client-ca: needs --tls-cert and --tls-key (client "
          "certificates are checked over TLS only)");
    }
    return pem;
  }
  absl::StatusOr<std::string> cert = ReadPemFile("--tls-cert", files.cert);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPemFile("--tls-key", files.key);
  if (!key.ok()) return key.status();
  if (absl::Status pair = CheckKeyPair(*cert, *key); !pair.ok()) return pair;
  pem.cert = *std::move(cert);
  pem.key = *std::move(key);
  if (!files.client_ca.empty()) {
    absl::StatusOr<std::string> ca =
        ReadPemFile("--tls-client-ca", files.client_ca);
    if (!ca.ok()) return ca.status();
    pem.client_ca = *std::move(ca);
  }
  return pem;
}

std::shared_ptr<grpc::ServerCredentials> GrpcServerCredentials(
    const ServerTlsPem& tls) {
  grpc::SslServerCredentialsOptions options(
      tls.client_ca.empty()
          ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
          : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = tls.client_ca;
  options.pem_key_cert_pairs.push_back({tls.key, tls.cert});
  return grpc::SslServerCredentials(options);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>>
GrpcChannelCredentials(const ClientTlsFiles& files) {
  grpc::SslCredentialsOptions options;
  if (!files.ca.empty()) {
    absl::StatusOr<std::string> ca = ReadPemFile("--tls-ca", files.ca);
    if (!ca.ok()) return ca.status();
    options.pem_root_certs = *std::move(ca);
  }
  if (files.cert.empty() != files.key.empty()) {
    return absl::InvalidArgumentError(
        "--tls-cert and --tls-key: give both or neither");
  }
  if (!files.cert.empty()) {
    absl::StatusOr<std::string> cert = ReadPemFile("--tls-cert", files.cert);
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadPemFile("--tls-key", files.key);
    if (!key.ok()) return key.status();
    options.pem_cert_chain = *std::move(cert);
    options.pem_private_key = *std::move(key);
  }
  return grpc::SslCredentials(options);
}

}  // namespace metrics::common

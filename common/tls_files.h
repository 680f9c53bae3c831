// The TLS files that metricsd and its clients are given by flags
// (--tls-cert, --tls-key, --tls-client-ca, --tls-ca), read and turned into
// gRPC credentials. Errors name the flag and the file.
//
// Thread-safety: plain functions.
#ifndef METRICS_COMMON_TLS_FILES_H_
#define METRICS_COMMON_TLS_FILES_H_

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace metrics::common {

// The server's files; all empty: no TLS.
struct ServerTlsFiles {
  std::string cert;       // --tls-cert: certificate chain (PEM)
  std::string key;        // --tls-key: its private key (PEM)
  std::string client_ca;  // --tls-client-ca: require client certificates
                          // signed by these CAs (mutual TLS); may be empty
};

// The server's TLS, read.
struct ServerTlsPem {
  std::string cert;
  std::string key;
  std::string client_ca;
  bool enabled() const { return !cert.empty(); }
};

// A client's files. `ca` empty means the system's roots.
struct ClientTlsFiles {
  std::string ca;    // --tls-ca
  std::string cert;  // --tls-cert: for mutual TLS, with key
  std::string key;   // --tls-key
};

// The content of the PEM file `path`, given by `flag`. INVALID_ARGUMENT
// naming both when it cannot be read or holds no PEM block.
absl::StatusOr<std::string> ReadPemFile(absl::string_view flag,
                                        const std::string& path);

// Reads the server's files: cert and key go together; client_ca needs them.
absl::StatusOr<ServerTlsPem> ReadServerTls(const ServerTlsFiles& files);

// gRPC server credentials: TLS with the certificate, and with client_ca set,
// refusing clients without a certificate signed by it.
std::shared_ptr<grpc::ServerCredentials> GrpcServerCredentials(
    const ServerTlsPem& tls);

// gRPC channel credentials for TLS with the client's files.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>>
GrpcChannelCredentials(const ClientTlsFiles& files);

}  // namespace metrics::common

#endif  // METRICS_COMMON_TLS_FILES_H_

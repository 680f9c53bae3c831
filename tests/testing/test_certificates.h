// Certificates for TLS tests, made at run time with Debian's openssl
// command in a directory of the test's: a CA, a server certificate it signs
// for localhost and 127.0.0.1, a client certificate it signs (mutual TLS),
// and a second, unrelated CA that a client may wrongly trust, with a client
// certificate of its own that a mutual-TLS server must refuse. EC P-256 keys,
// valid two days; nothing is ever checked in.
//
// Thread-safety: a plain function.
#ifndef METRICS_TESTS_TESTING_TEST_CERTIFICATES_H_
#define METRICS_TESTS_TESTING_TEST_CERTIFICATES_H_

#include <string>

#include "absl/status/statusor.h"

namespace metrics::test_util {

// Paths of the PEM files.
struct TestCertificates {
  std::string ca;           // the CA that signed server_* and client_*
  std::string server_cert;  // CN and subjectAltName localhost, 127.0.0.1
  std::string server_key;
  std::string client_cert;  // CN "agent"
  std::string client_key;
  std::string other_ca;  // a CA that signed only other_client_*
  std::string other_client_cert;  // CN "stranger", signed by other_ca
  std::string other_client_key;
};

// Makes the files in `dir` (created if missing). INTERNAL with openssl's
// output when a command fails.
absl::StatusOr<TestCertificates> CreateTestCertificates(const std::string& dir);

}  // namespace metrics::test_util

#endif  // METRICS_TESTS_TESTING_TEST_CERTIFICATES_H_

#include "tests/testing/test_certificates.h"

#include <sys/stat.h>

#include <fstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/subprocess.h"

namespace metrics::test_util {

using ::metrics::common::Subprocess;

namespace {

absl::Status OpenSsl(std::vector<std::string> args) {
  args.insert(args.begin(), "openssl");
  absl::StatusOr<std::unique_ptr<Subprocess>> p = Subprocess::Start(args);
  if (!p.ok()) return p.status();
  absl::StatusOr<int> code = (*p)->Wait(absl::Seconds(30));
  if (!code.ok()) return code.status();
  if (*code != 0) {
    return absl::InternalError(absl::StrCat("openssl ", args[1], " failed: ",
                                            (*p)->stderr_text()));
  }
  return absl::OkStatus();
}

// A new EC key and a certificate for `subject`: self-signed when `ca` is
// empty, else signed by ca (with ca_key) with the extensions in `ext`.
absl::Status MakeCertificate(const std::string& dir, const std::string& name,
                             const std::string& subject, const std::string& ca,
                             const std::string& ca_key,
                             const std::string& ext) {
  const std::string key = absl::StrCat(dir, "/", name, ".key");
  const std::string pem = absl::StrCat(dir, "/", name, ".pem");
  const std::vector<std::string> new_key = {
      "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
      "-keyout", key, "-subj", subject};
  if (ca.empty()) {
    std::vector<std::string> args = {"req", "-x509", "-days", "2", "-out", pem};
    args.insert(args.end(), new_key.begin(), new_key.end());
    return OpenSsl(args);
  }
  const std::string csr = absl::StrCat(dir, "/", name, ".csr");
  std::vector<std::string> args = {"req", "-out", csr};
  args.insert(args.end(), new_key.begin(), new_key.end());
  if (absl::Status s = OpenSsl(args); !s.ok()) return s;
  const std::string ext_file = absl::StrCat(dir, "/", name, ".ext");
  std::ofstream(ext_file) << ext << "\n";
  return OpenSsl({"x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key,
                  "-CAcreateserial", "-days", "2", "-out", pem, "-extfile",
                  ext_file});
}

}  // namespace

absl::StatusOr<TestCertificates> CreateTestCertificates(const std::string& dir) {
  ::mkdir(dir.c_str(), 0700);
  TestCertificates c;
  c.ca = dir + "/ca.pem";
  c.server_cert = dir + "/server.pem";
  c.server_key = dir + "/server.key";
  c.client_cert = dir + "/client.pem";
  c.client_key = dir + "/client.key";
  c.other_ca = dir + "/other-ca.pem";
  c.other_client_cert = dir + "/other-client.pem";
  c.other_client_key = dir + "/other-client.key";
  const std::string ca_key = dir + "/ca.key";
  for (absl::Status s :
       {MakeCertificate(dir, "ca", "/CN=metrics test CA", "", "", ""),
        MakeCertificate(dir, "other-ca", "/CN=another CA", "", "", ""),
        MakeCertificate(dir, "server", "/CN=localhost", c.ca, ca_key,
                        "subjectAltName=DNS:localhost,IP:127.0.0.1"),
        MakeCertificate(dir, "client", "/CN=agent", c.ca, ca_key,
                        "extendedKeyUsage=clientAuth"),
        MakeCertificate(dir, "other-client", "/CN=stranger", c.other_ca,
                        dir + "/other-ca.key", "extendedKeyUsage=clientAuth")}) {
    if (!s.ok()) return s;
  }
  return c;
}

}  // namespace metrics::test_util

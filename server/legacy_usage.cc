#include "server/legacy_usage.h"

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace metrics::server {

void LegacyUsage::Record(absl::string_view method, absl::string_view client,
                         absl::string_view successor) {
  bool first = false;
  {
    absl::MutexLock lock(&mu_);
    ++calls_[std::string(method)];
    if (logged_.size() >= kMaxLoggedClients) logged_.clear();
    first = logged_.insert(absl::StrCat(method, " ", client)).second;
  }
  if (first) {
    common::LogWarning("deprecated API: ", client, " called ", method,
                       "; its successor is ", successor);
  }
}

std::map<std::string, int64_t> LegacyUsage::Calls() const {
  absl::MutexLock lock(&mu_);
  return calls_;
}

}  // namespace metrics::server

#include "bench/bench_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "storage/batch_group.h"
#include "storage/pg/pg_metric_store.h"

namespace metrics::bench {

int Connection::Get(const std::string& path, const std::string& authorization) {
  if (fd_ < 0 && !Open()) return 0;
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ",
                   authorization, "\r\n\r\n");
  if (::send(fd_, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    Close();
    return 0;
  }
  int status = 0;
  if (!ReadResponse(status)) {
    Close();
    return 0;
  }
  return status;
}

bool Connection::Open() {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port_);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    Close();
    return false;
  }
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  buffer_.clear();
  return true;
}

void Connection::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool Connection::Fill() {
  char chunk[16384];
  const ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
  if (n <= 0) return false;
  buffer_.append(chunk, n);
  return true;
}

bool Connection::ReadResponse(int& status) {
  size_t end;
  while ((end = buffer_.find("\r\n\r\n")) == std::string::npos) {
    if (!Fill()) return false;
  }
  const std::string head = buffer_.substr(0, end);
  if (head.size() < 12 || !absl::SimpleAtoi(head.substr(9, 3), &status)) return false;
  size_t length = 0;
  std::string lower = head;
  std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
  if (const size_t at = lower.find("\r\ncontent-length:"); at != std::string::npos) {
    const size_t from = at + 17;
    (void)absl::SimpleAtoi(absl::StripAsciiWhitespace(
                               lower.substr(from, lower.find("\r\n", from) - from)),
                           &length);
  }
  while (buffer_.size() < end + 4 + length) {
    if (!Fill()) return false;
  }
  buffer_.erase(0, end + 4 + length);
  if (lower.find("\r\nconnection: close") != std::string::npos) Close();
  return true;
}

absl::Status SeedChartHour(const std::string& database_url) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  storage::pg::PgMetricStoreOptions store_options;
  store_options.database_url = database_url;
  {
    std::unique_ptr<storage::pg::PgMetricStore> store =
        storage::pg::PgMetricStore::Create(store_options);
    RETURN_IF_ERROR(store->CreateTrial(1, deadline).status());
    // An hour of one agent's four series, for the chart query.
    const int64_t start_us = absl::ToUnixMicros(absl::Now() - absl::Hours(1));
    storage::MetricBatch batch;
    batch.trial_id = 1;
    batch.stream_id = "bench";
    batch.agent_id = "agent";
    batch.sequence = 1;
    for (const char* series : {"cpu_util", "memory_free", "gpu_util", "net_rx"}) {
      batch.series.push_back({series, "", "percent"});
    }
    for (int s = 0; s < 3600; ++s) {
      storage::Report report;
      report.time_us = start_us + int64_t{s} * 1000000;
      for (uint32_t i = 0; i < 4; ++i) {
        report.series.push_back(i);
        report.values.push_back(double((s * 7 + i) % 100));
      }
      batch.reports.push_back(std::move(report));
    }
    absl::Status stored;
    {
      storage::BatchGroup group(*store, /*wait_for_room=*/true);
      group.Submit(std::move(batch),
                   [&stored](const storage::BatchOutcome& o) { stored = o.status; });
    }
    RETURN_IF_ERROR(stored);
  }
  return absl::OkStatus();
}

}  // namespace metrics::bench

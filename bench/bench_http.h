// What the benchmarks that ask metricsd over HTTP share (bench/auth_flood.sh,
// bench/doors.sh): a keep-alive HTTP/1.1 client of the loopback port, and a
// trial with an hour of four series to chart.
//
// Thread-safety: a Connection is used by one thread at a time.
#ifndef METRICS_BENCH_BENCH_HTTP_H_
#define METRICS_BENCH_BENCH_HTTP_H_

#include <string>

#include "absl/status/status.h"

namespace metrics::bench {

// One keep-alive HTTP/1.1 connection to 127.0.0.1:port, opened again after
// a failure or a "Connection: close".
class Connection {
 public:
  explicit Connection(int port) : port_(port) {}
  ~Connection() { Close(); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // The status of GET `path` with `authorization`; 0 when the exchange
  // failed.
  int Get(const std::string& path, const std::string& authorization);

 private:
  bool Open();
  void Close();
  bool Fill();
  bool ReadResponse(int& status);

  const int port_;
  int fd_ = -1;
  std::string buffer_;
};

// Trial 1 in the database at `database_url`, with an hour (to now) of one
// agent's four series a second: what the chart queries ask for.
absl::Status SeedChartHour(const std::string& database_url);

}  // namespace metrics::bench

#endif  // METRICS_BENCH_BENCH_HTTP_H_

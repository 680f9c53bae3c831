// Test helpers that look at the database directly, for tests that must
// check what was stored independently of the code that stored it, and that
// disturb the server (terminate connections, restart PostgreSQL).
//
// Thread-safety: each call opens its own connection; thread-safe.
#ifndef METRICS_STORAGE_PG_TESTING_PG_CHECKS_H_
#define METRICS_STORAGE_PG_TESTING_PG_CHECKS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "storage/rollup.h"

namespace metrics::storage::pg::test_util {

// Compares every stored rollup bucket of `trial_id` (all agents, series and
// widths) with the same aggregate computed by plain SQL over the raw rows
// of `metrics`: count, min, max, first and last exactly, sum to 1e-9
// relative. As readers do, each agent's unfolded 10 s bucket of an earlier
// version is added to the stored widths first (and must be its newest), and
// so are the raw rows not in the rollups yet (format 2), aggregated by SQL:
// a sample missing from both, or in both, is a difference. OK, or INTERNAL
// describing the first difference. Returns the number of buckets compared.
absl::StatusOr<int64_t> CheckRollupsMatchRawRows(const std::string& url,
                                                 int32_t trial_id);

// The raw samples of one series with time in [from_us, to_us), by plain
// SQL over `metrics`, in (time, ingest) order: (time_us, value) pairs.
absl::StatusOr<std::vector<std::pair<int64_t, double>>> RawSamplesOf(
    const std::string& url, int32_t trial_id, const std::string& agent_id,
    const std::string& gpu_uuid, const std::string& name, int64_t from_us,
    int64_t to_us);

// The aggregates of one series' raw samples in [from_us, to_us), grouped
// into epoch-aligned buckets of `bucket_us`, by plain SQL over `metrics`.
absl::StatusOr<std::map<int64_t, RollupStats>> RawBucketsOf(
    const std::string& url, int32_t trial_id, const std::string& agent_id,
    const std::string& gpu_uuid, const std::string& name, int64_t from_us,
    int64_t to_us, int64_t bucket_us);

// Values stored for `trial_id` in raw system rows: each of a packed row,
// each number of a jsonb one.
absl::StatusOr<int64_t> CountRawValues(const std::string& url,
                                       int32_t trial_id);

// Reports stored for `trial_id`, as a generic reader counts them: the rows
// of the view metrics_unpacked (a raw row is one, a sealed window as many
// as it holds).
absl::StatusOr<int64_t> CountReports(const std::string& url, int32_t trial_id);

// Raw rows of `trial_id` that repeat another row's (agent, time): each
// report of an agent has its own time in the benchmarks that ask, so any
// such row is a report stored twice. Returns how many extra rows.
absl::StatusOr<int64_t> CountRepeatedReports(const std::string& url,
                                             int32_t trial_id);

// Makes the database slow for writers: holds an EXCLUSIVE lock on
// ingest_positions for `duration` (an ingest commit of a batch with a stream
// waits for it inside its transaction; reads go on), then releases it.
absl::Status HoldIngestFor(const std::string& url, absl::Duration duration);

// The same lock held until destroyed: an ingest commit that reaches its
// stream positions waits there, inside its transaction and holding its
// streams' advisory locks (a writer made slow at will).
class IngestLock {
 public:
  static absl::StatusOr<std::unique_ptr<IngestLock>> Take(const std::string& url);
  ~IngestLock();

 private:
  struct Session;
  explicit IngestLock(std::unique_ptr<Session> session);
  std::unique_ptr<Session> session_;
};

// Makes `database` refuse connections and ends the ones it has (the
// database unreachable, as far as its clients can tell), or lets them in
// again. Runs through `admin_url`, another database of the same server, as
// one cannot let connections back in through a database that refuses them.
absl::Status SetConnectionsAllowed(const std::string& admin_url,
                                   const std::string& database, bool allowed);

// Runs `sql` and returns the first column of the first row as text ("" for
// no row or NULL).
absl::StatusOr<std::string> QueryScalar(const std::string& url,
                                        const std::string& sql);

// One connection kept for many queries, such as a poll's (each new
// connection costs PostgreSQL a backend's start), opened again after it
// broke. Thread-safety: one thread at a time.
class Session {
 public:
  explicit Session(std::string url);
  ~Session();
  // As QueryScalar above, on the kept connection.
  absl::StatusOr<std::string> QueryScalar(const std::string& sql);

 private:
  struct Connection;  // pqxx's, kept out of this header
  std::string url_;
  std::unique_ptr<Connection> conn_;
};

// Terminates every backend connected to `url`'s database whose
// application_name starts with `prefix` (other tests' databases on the same
// server are left alone). Returns how many.
absl::StatusOr<int> TerminateBackends(const std::string& url,
                                      absl::string_view prefix);

// Restarts the PostgreSQL server `url` points to (pg_ctl restart -m fast,
// as the owner of its data directory). Needs superuser on the server and
// the right to become the owner (root, or the owner itself), as under
// pg_virtualenv.
absl::Status RestartServer(const std::string& url);

// For benchmarks: COPYs `rows` (agent id, time, packed values) of `trial_id`
// into the profiling partition in one transaction, the way the ingest
// writer stores raw rows, and returns how long it took.
struct RawRow {
  std::string agent_id;
  int64_t time_us = 0;
  std::string packed_values;  // PackReport's bytes
};
absl::StatusOr<absl::Duration> CopyRawRows(const std::string& url,
                                           int32_t trial_id,
                                           const std::vector<RawRow>& rows);

// For benchmarks: the table TimeNaiveBucketQuery reads, rows in the layout
// before migration 0004 (values as jsonb, the old primary key), made by the
// caller's INSERT ... SELECT `rows_sql` of (trial_id, agent_id, end_time,
// metrics).
absl::Status MakeNaiveJsonRows(const std::string& url,
                               const std::string& rows_sql);

// For benchmarks: runs the naive answer to a chart query, a date_bin
// GROUP BY over the jsonb rows of one agent-wide series (MakeNaiveJsonRows)
// computing count, min, max, mean, first and last per bucket, and returns
// (elapsed, buckets).
absl::StatusOr<std::pair<absl::Duration, int64_t>> TimeNaiveBucketQuery(
    const std::string& url, int32_t trial_id, const std::string& agent_id,
    const std::string& name, int64_t from_us, int64_t to_us,
    int64_t bucket_us);

// VACUUM ANALYZE of the whole database, so what comes next starts settled
// rather than sharing the machine with an autovacuum pass.
absl::Status VacuumAnalyze(const std::string& url);

// For benchmarks: empties the profiling partition, so two measured loads
// start from the same state.
absl::Status TruncateProfilingRows(const std::string& url);

}  // namespace metrics::storage::pg::test_util

#endif  // METRICS_STORAGE_PG_TESTING_PG_CHECKS_H_

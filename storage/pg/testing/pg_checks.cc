#include "storage/pg/testing/pg_checks.h"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <pqxx/connection>
#include <pqxx/nontransaction>
#include <pqxx/result>
#include <pqxx/transaction>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <tuple>
#include <vector>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "storage/format/packed_report.h"
#include "storage/pg/ingest/copy_rows.h"
#include "storage/pg/pg_errors.h"
#include "storage/pg/sql_arrays.h"
#include "storage/pg/sql_time.h"
#include "storage/report_json.h"
#include "storage/format/sealed_window.h"
#include "storage/rollup.h"
#include "storage/format/rollup_codec.h"

namespace metrics::storage::pg::test_util {

namespace {

// The samples of trial $1's system series matching `series` (a condition
// on `s`, the series row) as CTEs `sealed` and `samples` (id, ord, agent_id,
// series_id, t, v), by plain SQL over the rows: packed ones decoded by the
// SQL decoder of migration 0004 (with 0008's format 2), sealed windows by
// that of 0007 (each decoded once: PL/pgSQL takes about a microsecond a
// value), older ones read from their jsonb. (t, id, ord) is the order of
// ingest: ord is the place in a sealed window. With `pending_only` (an SQL
// boolean), only the raw rows not in the rollups yet (format 2).
std::string SamplesCtesSql(absl::string_view series, absl::string_view pending_only) {
  return absl::StrCat(R"sql(
WITH sealed AS MATERIALIZED (
  SELECT m.id, m.agent_id, u.*
    FROM metrics_profiling m CROSS JOIN LATERAL metrics_unseal(m.sealed_values) u
   WHERE m.trial_id = $1 AND m.metric_group = 'system' AND m.sealed_values IS NOT NULL
     AND NOT )sql", pending_only, R"sql(
), samples AS MATERIALIZED (
  SELECT m.id, 0 AS ord, m.agent_id, s.series_id, )sql", EpochMicrosSql("m.end_time"),
                      R"sql( AS t, u.value AS v
    FROM metrics_profiling m CROSS JOIN LATERAL metrics_unpack(m.packed_values) u
    JOIN series s ON s.trial_id = m.trial_id AND s.series_id = u.series_id
                 AND s.agent_id = m.agent_id AND s.metric_group = 'system'
   WHERE m.trial_id = $1 AND m.metric_group = 'system' AND )sql", series, R"sql(
     AND (NOT )sql", pending_only, R"sql( OR get_byte(m.packed_values, 0) = 2)
  UNION ALL
  SELECT u.id, u.report, u.agent_id, s.series_id, u.time_us, u.value
    FROM sealed u
    JOIN series s ON s.trial_id = $1 AND s.series_id = u.series_id
                 AND s.agent_id = u.agent_id AND s.metric_group = 'system'
   WHERE )sql", series, R"sql(
  UNION ALL
  SELECT m.id, 0, m.agent_id, s.series_id, )sql", EpochMicrosSql("m.end_time"),
                      " AS t, ",
                      ReportValueSql("m.metrics", "s.name", "s.gpu_uuid"),
                      R"sql( AS v
    FROM metrics_profiling m
    JOIN series s ON s.trial_id = m.trial_id AND s.agent_id = m.agent_id
   WHERE m.trial_id = $1 AND m.metric_group = 'system' AND )sql", series, R"sql(
     AND s.metric_group = 'system' AND m.metrics IS NOT NULL AND NOT )sql", pending_only, R"sql(
))sql");
}

// Every (agent, series, width, bucket) of a trial aggregated by plain SQL
// over the raw rows (SamplesCtesSql); first and last by the order of
// ingest. $2: the widths; with $3, only the raw rows not in the rollups yet.
std::string RawAggregatesSql() {
  return absl::StrCat(SamplesCtesSql("true", "$3::boolean"), R"sql(
SELECT agent_id, series_id, w,
       t - (((t % (w * 1000000)) + w * 1000000) % (w * 1000000)) AS bucket,
       count(*), sum(v), min(v), max(v),
       (array_agg(t ORDER BY t, id, ord))[1], (array_agg(v ORDER BY t, id, ord))[1],
       (array_agg(t ORDER BY t DESC, id DESC, ord DESC))[1],
       (array_agg(v ORDER BY t DESC, id DESC, ord DESC))[1]
  FROM samples CROSS JOIN unnest($2::bigint[]) AS w
 WHERE v IS NOT NULL
 GROUP BY 1, 2, 3, 4)sql");
}

// Calls each(agent, reports) for every sealed window of `trial_id`,
// decoded here (metrics_unseal has tests of its own).
absl::Status ForEachSealedWindow(
    pqxx::transaction_base& tx, int32_t trial_id,
    absl::FunctionRef<void(const std::string&, const std::vector<WindowReport>&)> each) {
  std::string bytes;
  for (const auto& row : tx.exec_params(
           "SELECT agent_id, sealed_values FROM metrics_profiling WHERE trial_id = $1 "
           "AND metric_group = 'system' AND sealed_values IS NOT NULL",
           trial_id)) {
    if (!DecodeByteaHexInto(absl::string_view(row[1].c_str(), row[1].size()), bytes)) {
      return absl::DataLossError("sealed_values is not bytea's hex");
    }
    ASSIGN_OR_RETURN(std::vector<WindowReport> window, UnsealWindow(bytes));
    each(row[0].as<std::string>(), window);
  }
  return absl::OkStatus();
}

std::string Describe(const RollupStats& s) {
  return absl::StrCat("count=", s.count, " sum=", s.sum, " min=", s.min,
                      " max=", s.max, " first=", s.first_time_us, "/",
                      s.first_value, " last=", s.last_time_us, "/",
                      s.last_value);
}

}  // namespace

absl::StatusOr<int64_t> CheckRollupsMatchRawRows(const std::string& url,
                                                 int32_t trial_id) {
  return GuardPg("checking rollups", [&]() -> absl::StatusOr<int64_t> {
    pqxx::connection conn(url);
    // One snapshot: a seal moves samples from raw rows to the rollups.
    pqxx::work tx(conn);
    tx.exec("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ");
    using Key = std::tuple<std::string, int64_t, int, int64_t>;
    std::map<Key, RollupStats> stored;
    // Per agent: its newest 10 s bucket of an earlier version, and its
    // unfolded ones.
    struct Finest {
      int64_t newest = INT64_MIN;
      std::vector<std::pair<int64_t, AgentRollup>> unfolded;
    };
    std::map<std::string, Finest> finest;
    for (const auto& row : tx.exec_params(
             absl::StrCat("SELECT agent_id, width_s, ",
                          EpochMicrosSql("bucket_start"),
                          ", stats FROM system_rollups WHERE trial_id = $1"),
             trial_id)) {
      const std::string agent = row[0].as<std::string>();
      const int width = row[1].as<int>();
      const int64_t start = row[2].as<int64_t>();
      const std::string bytes = DecodeByteaHex(row[3].as<std::string>());
      ASSIGN_OR_RETURN(AgentRollup rollup, DecodeAgentRollup(bytes, start));
      if (width == kLegacyFinestWidthSeconds) {
        finest[agent].newest = std::max(finest[agent].newest, start);
        if (IsUnfolded(bytes)) finest[agent].unfolded.emplace_back(start, rollup);
        continue;
      }
      for (const auto& [series_id, stats] : rollup) {
        stored[{agent, series_id, width, start}] = stats;
      }
    }
    // An unfolded bucket is its agent's newest 10 s one, which the stored
    // widths do not hold yet: added to them here, as readers do.
    for (const auto& [agent, f] : finest) {
      for (const auto& [start, rollup] : f.unfolded) {
        if (start != f.newest || f.unfolded.size() > 1) {
          return absl::InternalError(absl::StrCat(
              "agent ", agent, " has an unfolded 10 s bucket at ", start,
              " that is not its newest (", f.newest, ")"));
        }
        for (const int width : kRollupWidthsSeconds) {
          for (const auto& [series_id, stats] : rollup) {
            const auto [it, added] = stored.try_emplace(
                Key{agent, series_id, width, BucketStartMicros(start, width)},
                stats);
            if (!added) it->second.Merge(stats);
          }
        }
      }
    }
    const std::vector<int64_t> widths(std::begin(kRollupWidthsSeconds),
                                      std::end(kRollupWidthsSeconds));
    const auto stats_of = [](const pqxx::row& row) {
      RollupStats raw;
      raw.count = row[4].as<int64_t>();
      raw.sum = row[5].as<double>();
      raw.min = row[6].as<double>();
      raw.max = row[7].as<double>();
      raw.first_time_us = row[8].as<int64_t>();
      raw.first_value = row[9].as<double>();
      raw.last_time_us = row[10].as<int64_t>();
      raw.last_value = row[11].as<double>();
      return raw;
    };
    // The raw rows waiting for their seal, added after the stored buckets
    // (they were ingested later), as readers do.
    for (const auto& row :
         tx.exec_params(RawAggregatesSql(), trial_id, IntArray(widths), true)) {
      const RollupStats pending = stats_of(row);
      const auto [it, added] = stored.try_emplace(
          Key{row[0].as<std::string>(), row[1].as<int64_t>(), row[2].as<int>(),
              row[3].as<int64_t>()},
          pending);
      if (!added) it->second.Merge(pending);
    }
    int64_t compared = 0;
    for (const auto& row :
         tx.exec_params(RawAggregatesSql(), trial_id, IntArray(widths), false)) {
      const Key key{row[0].as<std::string>(), row[1].as<int64_t>(),
                    row[2].as<int>(), row[3].as<int64_t>()};
      const RollupStats raw = stats_of(row);
      const std::string where =
          absl::StrCat("agent ", std::get<0>(key), " series ",
                       std::get<1>(key), " width ", std::get<2>(key),
                       "s bucket ", std::get<3>(key));
      auto it = stored.find(key);
      if (it == stored.end()) {
        return absl::InternalError(
            absl::StrCat("no stored rollup for ", where, "; raw: ",
                         Describe(raw)));
      }
      RollupStats s = it->second;
      const bool sum_close =
          std::abs(s.sum - raw.sum) <= 1e-9 * std::max(1.0, std::abs(raw.sum));
      s.sum = raw.sum;
      if (!sum_close || !(s == raw)) {
        return absl::InternalError(absl::StrCat(
            "rollup differs at ", where, ": stored ", Describe(it->second),
            "; raw ", Describe(raw)));
      }
      stored.erase(it);
      ++compared;
    }
    if (!stored.empty()) {
      return absl::InternalError(absl::StrCat(
          stored.size(), " stored rollup buckets have no raw rows, e.g. agent ",
          std::get<0>(stored.begin()->first), " series ",
          std::get<1>(stored.begin()->first)));
    }
    return compared;
  });
}

namespace {

// SamplesCtesSql of one series ($2 agent, $3 GPU, $4 name) and a CTE
// `wanted` of its samples with t in [$5, $6).
std::string SeriesSamplesSql() {
  return absl::StrCat(
      SamplesCtesSql("s.agent_id = $2 AND s.gpu_uuid = $3 AND s.name = $4", "false"),
      ", wanted AS (SELECT * FROM samples WHERE v IS NOT NULL AND t >= $5 AND t < $6) ");
}

}  // namespace

absl::StatusOr<std::vector<std::pair<int64_t, double>>> RawSamplesOf(
    const std::string& url, int32_t trial_id, const std::string& agent_id,
    const std::string& gpu_uuid, const std::string& name, int64_t from_us,
    int64_t to_us) {
  return GuardPg(
      "reading raw samples",
      [&]() -> absl::StatusOr<std::vector<std::pair<int64_t, double>>> {
        pqxx::connection conn(url);
        pqxx::nontransaction tx(conn);
        std::vector<std::pair<int64_t, double>> samples;
        for (const auto& row : tx.exec_params(
                 absl::StrCat(SeriesSamplesSql(), "SELECT t, v FROM wanted ORDER BY t, id, ord"), trial_id,
                 agent_id, gpu_uuid, name, from_us, to_us)) {
          samples.emplace_back(row[0].as<int64_t>(), row[1].as<double>());
        }
        return samples;
      });
}

absl::StatusOr<std::map<int64_t, RollupStats>> RawBucketsOf(
    const std::string& url, int32_t trial_id, const std::string& agent_id,
    const std::string& gpu_uuid, const std::string& name, int64_t from_us,
    int64_t to_us, int64_t bucket_us) {
  return GuardPg(
      "aggregating raw samples",
      [&]() -> absl::StatusOr<std::map<int64_t, RollupStats>> {
        pqxx::connection conn(url);
        pqxx::nontransaction tx(conn);
        std::map<int64_t, RollupStats> buckets;
        for (const auto& row : tx.exec_params(
                 absl::StrCat(
                     SeriesSamplesSql(),
                     "SELECT t - (((t % $7) + $7) % $7) AS bucket, count(*), "
                     "sum(v), min(v), max(v), "
                     "(array_agg(t ORDER BY t, id, ord))[1], "
                     "(array_agg(v ORDER BY t, id, ord))[1], "
                     "(array_agg(t ORDER BY t DESC, id DESC, ord DESC))[1], "
                     "(array_agg(v ORDER BY t DESC, id DESC, ord DESC))[1] "
                     "FROM wanted GROUP BY 1"),
                 trial_id, agent_id, gpu_uuid, name, from_us, to_us,
                 bucket_us)) {
          RollupStats& b = buckets[row[0].as<int64_t>()];
          b.count = row[1].as<int64_t>();
          b.sum = row[2].as<double>();
          b.min = row[3].as<double>();
          b.max = row[4].as<double>();
          b.first_time_us = row[5].as<int64_t>();
          b.first_value = row[6].as<double>();
          b.last_time_us = row[7].as<int64_t>();
          b.last_value = row[8].as<double>();
        }
        return buckets;
      });
}

absl::StatusOr<int64_t> CountRawValues(const std::string& url,
                                       int32_t trial_id) {
  return GuardPg("counting raw values", [&]() -> absl::StatusOr<int64_t> {
    pqxx::connection conn(url);
    // One snapshot: a sealer may move rows between the statements.
    pqxx::transaction<pqxx::isolation_level::repeatable_read> tx(conn);
    // Rows with jsonb, through SQL. Packed rows decoded here: the view
    // metrics_unpacked decodes them in PL/pgSQL at about 85 us a row, 17 s
    // for a benchmark's 200 000 (its decoder has tests of its own).
    int64_t values =
        tx.exec_params(
              "SELECT coalesce(sum(CASE jsonb_typeof(e.value) WHEN 'object' "
              "  THEN (SELECT count(*) FROM jsonb_object_keys(e.value)) "
              "  ELSE 1 END), 0)::bigint "
              "FROM metrics m, jsonb_each(m.metrics) e "
              "WHERE m.trial_id = $1 AND m.metric_group = 'system'",
              trial_id)[0][0]
            .as<int64_t>();
    std::string bytes;
    for (const auto& row : tx.exec_params(
             "SELECT packed_values FROM metrics WHERE trial_id = $1 "
             "AND metric_group = 'system' AND packed_values IS NOT NULL",
             trial_id)) {
      if (!DecodeByteaHexInto(
              absl::string_view(row[0].c_str(), row[0].size()), bytes)) {
        return absl::DataLossError("packed_values is not bytea's hex");
      }
      ASSIGN_OR_RETURN(std::vector<SeriesValue> report, UnpackReport(bytes));
      values += static_cast<int64_t>(report.size());
    }
    RETURN_IF_ERROR(ForEachSealedWindow(
        tx, trial_id, [&](const std::string&, const std::vector<WindowReport>& window) {
          for (const WindowReport& r : window) values += static_cast<int64_t>(r.values.size());
        }));
    return values;
  });
}

absl::StatusOr<int64_t> CountReports(const std::string& url, int32_t trial_id) {
  return GuardPg("counting reports", [&]() -> absl::StatusOr<int64_t> {
    pqxx::connection conn(url);
    pqxx::nontransaction tx(conn);
    return tx
        .exec_params("SELECT count(*) FROM metrics_unpacked WHERE trial_id = $1", trial_id)[0][0]
        .as<int64_t>();
  });
}

absl::StatusOr<int64_t> CountRepeatedReports(const std::string& url,
                                             int32_t trial_id) {
  return GuardPg("counting repeated reports", [&]() -> absl::StatusOr<int64_t> {
    pqxx::connection conn(url);
    // One snapshot: a sealer may move rows between the statements.
    pqxx::transaction<pqxx::isolation_level::repeatable_read> tx(conn);
    // Every report's (agent, time): raw rows' by SQL, sealed windows'
    // decoded here.
    std::map<std::string, std::vector<int64_t>> times;
    for (const auto& row : tx.exec_params(
             absl::StrCat("SELECT agent_id, ", EpochMicrosSql("end_time"),
                          " FROM metrics_profiling WHERE trial_id = $1 AND metric_group = "
                          "'system' AND sealed_values IS NULL"),
             trial_id)) {
      times[row[0].as<std::string>()].push_back(row[1].as<int64_t>());
    }
    RETURN_IF_ERROR(ForEachSealedWindow(
        tx, trial_id, [&](const std::string& agent, const std::vector<WindowReport>& window) {
          std::vector<int64_t>& of_agent = times[agent];
          for (const WindowReport& r : window) of_agent.push_back(r.time_us);
        }));
    int64_t repeated = 0;
    for (auto& [agent, of_agent] : times) {
      std::sort(of_agent.begin(), of_agent.end());
      for (size_t i = 1; i < of_agent.size(); ++i) repeated += of_agent[i] == of_agent[i - 1];
    }
    return repeated;
  });
}

absl::Status HoldIngestFor(const std::string& url, absl::Duration duration) {
  return GuardPg("holding the stream positions", [&]() -> absl::Status {
    pqxx::connection conn(url);
    pqxx::work tx(conn);
    tx.exec("LOCK TABLE ingest_positions IN EXCLUSIVE MODE");
    absl::SleepFor(duration);
    tx.abort();
    return absl::OkStatus();
  });
}

absl::Status SetConnectionsAllowed(const std::string& admin_url,
                                   const std::string& database, bool allowed) {
  const std::string& name = database;
  return GuardPg("changing whether the database takes connections",
                 [&]() -> absl::Status {
                   pqxx::connection conn(admin_url);
                   pqxx::nontransaction tx(conn);
                   tx.exec(absl::StrCat("ALTER DATABASE ", tx.quote_name(name),
                                        " ALLOW_CONNECTIONS ",
                                        allowed ? "true" : "false"));
                   if (!allowed) {
                     tx.exec_params("SELECT pg_terminate_backend(pid) FROM "
                                    "pg_stat_activity WHERE datname = $1",
                                    name);
                   }
                   return absl::OkStatus();
                 });
}

struct IngestLock::Session {
  explicit Session(const std::string& url) : conn(url), tx(conn) {}
  pqxx::connection conn;
  pqxx::work tx;
};

IngestLock::IngestLock(std::unique_ptr<Session> session) : session_(std::move(session)) {}

IngestLock::~IngestLock() {
  try {
    session_->tx.abort();
  } catch (const std::exception&) {
    // The lock goes with the connection, closed next.
  }
}

absl::StatusOr<std::unique_ptr<IngestLock>> IngestLock::Take(const std::string& url) {
  return GuardPg("locking the stream positions",
                 [&]() -> absl::StatusOr<std::unique_ptr<IngestLock>> {
                   auto session = std::make_unique<Session>(url);
                   session->tx.exec("LOCK TABLE ingest_positions IN EXCLUSIVE MODE");
                   return std::unique_ptr<IngestLock>(new IngestLock(std::move(session)));
                 });
}

absl::StatusOr<std::string> QueryScalar(const std::string& url,
                                        const std::string& sql) {
  return GuardPg("test query", [&]() -> absl::StatusOr<std::string> {
    pqxx::connection conn(url);
    pqxx::nontransaction tx(conn);
    pqxx::result r = tx.exec(sql);
    return r.empty() || r[0][0].is_null() ? "" : r[0][0].as<std::string>();
  });
}

struct Session::Connection {
  explicit Connection(const std::string& url) : conn(url) {}
  pqxx::connection conn;
};

Session::Session(std::string url) : url_(std::move(url)) {}

Session::~Session() = default;

absl::StatusOr<std::string> Session::QueryScalar(const std::string& sql) {
  absl::StatusOr<std::string> value =
      GuardPg("test query", [&]() -> absl::StatusOr<std::string> {
        if (conn_ == nullptr) conn_ = std::make_unique<Connection>(url_);
        pqxx::nontransaction tx(conn_->conn);
        pqxx::result r = tx.exec(sql);
        return r.empty() || r[0][0].is_null() ? "" : r[0][0].as<std::string>();
      });
  if (!value.ok()) conn_.reset();  // the next query connects anew
  return value;
}

absl::StatusOr<int> TerminateBackends(const std::string& url,
                                      absl::string_view prefix) {
  return GuardPg("terminating backends", [&]() -> absl::StatusOr<int> {
    pqxx::connection conn(url);
    pqxx::nontransaction tx(conn);
    return tx
        .exec_params(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))::int "
            "FROM pg_stat_activity WHERE starts_with(application_name, $1) "
            "AND datname = current_database() AND pid <> pg_backend_pid()",
            std::string(prefix))[0][0]
        .as<int>();
  });
}

absl::Status RestartServer(const std::string& url) {
  std::string data_dir, bin_dir;
  RETURN_IF_ERROR(GuardPg("locating the server", [&]() -> absl::Status {
    pqxx::connection conn(url);
    pqxx::nontransaction tx(conn);
    data_dir = tx.exec("SHOW data_directory")[0][0].as<std::string>();
    bin_dir = tx.exec("SELECT setting FROM pg_config WHERE name = 'BINDIR'")[0][0]
                  .as<std::string>();
    return absl::OkStatus();
  }));
  struct stat info;
  if (::stat(data_dir.c_str(), &info) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot stat the data directory ", data_dir));
  }
  std::string command = absl::StrCat(
      bin_dir, "/pg_ctl -D '", data_dir, "' -l '", data_dir,
      "/restart-by-test.log' -m fast -w -t 60 restart > /dev/null");
  if (::geteuid() != info.st_uid) {
    const passwd* owner = ::getpwuid(info.st_uid);
    if (owner == nullptr || ::geteuid() != 0) {
      return absl::PermissionDeniedError(absl::StrCat(
          "restarting PostgreSQL needs to run as the owner of ", data_dir));
    }
    command = absl::StrCat("runuser -u ", owner->pw_name, " -- ", command);
  }
  if (std::system(command.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("failed: ", command));
  }
  return absl::OkStatus();
}

absl::StatusOr<absl::Duration> CopyRawRows(const std::string& url,
                                           int32_t trial_id,
                                           const std::vector<RawRow>& rows) {
  return GuardPg("copying raw rows", [&]() -> absl::StatusOr<absl::Duration> {
    pqxx::connection conn(url);
    const absl::Time start = absl::Now();
    pqxx::work tx(conn);
    // As the ingest writer does (GroupTransaction::WriteRawRows).
    CopyRows copy(tx, "metrics_profiling",
                  {"trial_id", "partition_type", "metric_group", "agent_id",
                   "end_time", "packed_values"});
    for (const RawRow& row : rows) {
      copy.Int(trial_id)
          .Text("PROFILING")
          .Text("system")
          .Text(row.agent_id)
          .Timestamp(row.time_us)
          .Bytea(row.packed_values);
      copy.EndRow();
    }
    copy.Complete();
    tx.commit();
    return absl::Now() - start;
  });
}

absl::Status MakeNaiveJsonRows(const std::string& url,
                               const std::string& rows_sql) {
  return GuardPg("making the naive query's jsonb rows", [&]() -> absl::Status {
    pqxx::connection conn(url);
    pqxx::nontransaction tx(conn);
    tx.exec(
        "CREATE TABLE IF NOT EXISTS naive_json_rows (trial_id integer NOT "
        "NULL, id bigserial, metric_group text NOT NULL DEFAULT 'system', "
        "agent_id text NOT NULL, end_time timestamptz NOT NULL, metrics "
        "jsonb NOT NULL, PRIMARY KEY (trial_id, metric_group, agent_id, "
        "end_time, id))");
    tx.exec(absl::StrCat("INSERT INTO naive_json_rows (trial_id, agent_id, "
                         "end_time, metrics) ",
                         rows_sql));
    tx.exec("VACUUM ANALYZE naive_json_rows");
    return absl::OkStatus();
  });
}

absl::StatusOr<std::pair<absl::Duration, int64_t>> TimeNaiveBucketQuery(
    const std::string& url, int32_t trial_id, const std::string& agent_id,
    const std::string& name, int64_t from_us, int64_t to_us,
    int64_t bucket_us) {
  return GuardPg(
      "naive bucket query",
      [&]() -> absl::StatusOr<std::pair<absl::Duration, int64_t>> {
        pqxx::connection conn(url);
        pqxx::nontransaction tx(conn);
        tx.exec("SET jit = off");
        const absl::Time start = absl::Now();
        pqxx::result r = tx.exec_params(
            "SELECT date_bin($6 * interval '1 microsecond', end_time, "
            "         timestamptz 'epoch') AS bucket, "
            "       count(*), min(v), max(v), avg(v), "
            "       (array_agg(v ORDER BY end_time, id))[1], "
            "       (array_agg(v ORDER BY end_time DESC, id DESC))[1] "
            "FROM (SELECT end_time, id, (metrics ->> $3)::float8 AS v "
            "        FROM naive_json_rows WHERE trial_id = $1 "
            "         AND metric_group = 'system' AND agent_id = $2 "
            "         AND end_time >= timestamptz 'epoch' + $4 * interval '1 microsecond' "
            "         AND end_time < timestamptz 'epoch' + $5 * interval '1 microsecond') s "
            "WHERE v IS NOT NULL GROUP BY 1 ORDER BY 1",
            trial_id, agent_id, name, from_us, to_us, bucket_us);
        return std::make_pair(absl::Now() - start,
                              static_cast<int64_t>(r.size()));
      });
}

absl::Status VacuumAnalyze(const std::string& url) {
  return GuardPg("vacuuming", [&]() -> absl::Status {
    pqxx::connection conn(url);
    pqxx::nontransaction tx(conn);
    tx.exec("VACUUM ANALYZE");
    return absl::OkStatus();
  });
}

absl::Status TruncateProfilingRows(const std::string& url) {
  return GuardPg("truncating metrics_profiling", [&]() -> absl::Status {
    pqxx::connection conn(url);
    pqxx::nontransaction tx(conn);
    tx.exec("TRUNCATE metrics_profiling");
    tx.exec("CHECKPOINT");  // so neither load pays for the other's writes
    return absl::OkStatus();
  });
}

}  // namespace metrics::storage::pg::test_util

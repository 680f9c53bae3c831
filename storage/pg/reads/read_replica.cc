#include "storage/pg/reads/read_replica.h"

#include <pqxx/nontransaction>

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "storage/pg/connection.h"
#include "storage/pg/pg_errors.h"
#include "storage/pg/sql_time.h"

namespace metrics::storage::pg {

namespace {

// Opens `conn` to `url` unless it is open. A check must fail, not hang,
// when a server or the network does: every wait is bounded.
absl::Status ConnectForChecks(std::unique_ptr<pqxx::connection>& conn,
                              const std::string& url) {
  if (conn != nullptr) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::string bounded,
                   WithConnectionOptions(url, {{"connect_timeout", "3"},
                                               {"tcp_user_timeout", "3000"}}));
  ASSIGN_OR_RETURN(conn, Connect(bounded, "metricsd-read-lag"));
  pqxx::nontransaction tx(*conn);
  tx.exec("SET statement_timeout = 3000");
  return absl::OkStatus();
}

// The standby's URL for the read pool: a standby that went away fails a
// read's connect within 3 s, which then goes to the primary. An unparsable
// URL stays as given, for the monitor to report.
std::string ReadPoolUrl(const std::string& url) {
  absl::StatusOr<std::string> bounded =
      WithConnectionOptions(url, {{"connect_timeout", "3"}});
  return bounded.ok() ? *bounded : url;
}

std::string Seconds(absl::Duration d) {
  return absl::StrCat(std::round(absl::ToDoubleSeconds(d) * 10) / 10, " s");
}

}  // namespace

absl::Duration ReplicaLag::Observe(
    absl::Time primary_now, bool replayed_it,
    std::optional<absl::Time> last_replayed_commit) {
  if (replayed_it) {
    current_as_of_ = std::max(current_as_of_, primary_now);
  } else if (last_replayed_commit.has_value()) {
    current_as_of_ = std::max(current_as_of_, *last_replayed_commit);
  }
  return std::max(absl::ZeroDuration(), primary_now - current_as_of_);
}

ReadReplica::ReadReplica(ReadReplicaOptions options)
    : options_(std::move(options)),
      pool_(ConnectionPoolOptions{ReadPoolUrl(options_.standby_url), "metricsd",
                                  options_.pool_size, options_.statements,
                                  KeyedAccessSettings()}) {
  monitor_ = std::thread([this] { Monitor(); });
}

ReadReplica::~ReadReplica() { Shutdown(); }

void ReadReplica::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  monitor_.join();  // at most a check's bounded waits
  pool_.Shutdown();
}

bool ReadReplica::UseStandby() {
  absl::MutexLock lock(&mu_);
  Verdict verdict = verdict_;
  if (stopping_ || absl::Now() - decided_at_ > options_.verdict_expires) {
    verdict = Verdict::kUnreachable;
  }
  switch (verdict) {
    case Verdict::kUse:
      ++standby_reads_;
      return true;
    case Verdict::kUnreachable:
      ++unreachable_;
      break;
    case Verdict::kLagging:
      ++lagging_;
      break;
    case Verdict::kNotStandby:
      ++not_standby_;
      break;
  }
  return false;
}

bool ReadReplica::WorthRetryingOnPrimary(const absl::Status& failure) {
  // ABORTED: "canceling statement due to conflict with recovery"; NOT_FOUND:
  // a trial created since the standby's last replay.
  return absl::IsUnavailable(failure) || absl::IsAborted(failure) ||
         absl::IsNotFound(failure);
}

void ReadReplica::ReadFailed(const absl::Status& failure) {
  ++retried_;
  if (!absl::IsUnavailable(failure)) return;
  absl::MutexLock lock(&mu_);
  verdict_ = Verdict::kUnreachable;
}

ReadRoutingStatistics ReadReplica::Statistics() const {
  ReadRoutingStatistics s;
  s.standby = true;
  s.standby_reads = standby_reads_.load();
  s.fallback_unreachable = unreachable_.load();
  s.fallback_lagging = lagging_.load();
  s.fallback_not_standby = not_standby_.load();
  s.fallback_retried = retried_.load();
  absl::MutexLock lock(&mu_);
  if (lag_seen_.has_value()) s.lag_seconds = absl::ToDoubleSeconds(*lag_seen_);
  return s;
}

void ReadReplica::Monitor() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    mu_.Unlock();
    std::string why;
    const Verdict verdict = Check(&why);
    Decide(verdict, std::move(why));
    mu_.Lock();
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), options_.check_every);
  }
}

ReadReplica::Verdict ReadReplica::Check(std::string* why) {
  struct Primary {
    std::string lsn;
    absl::Time now;
  };
  absl::StatusOr<Primary> primary =
      GuardPg("checking the primary", [&]() -> absl::StatusOr<Primary> {
        RETURN_IF_ERROR(ConnectForChecks(primary_check_, options_.primary_url));
        pqxx::nontransaction tx(*primary_check_);
        const pqxx::row row = tx.exec1(absl::StrCat(
            "SELECT pg_current_wal_lsn()::text, ",
            EpochMicrosSql("clock_timestamp()")));
        return Primary{row[0].as<std::string>(),
                       absl::FromUnixMicros(row[1].as<int64_t>())};
      });
  if (!primary.ok()) primary_check_.reset();

  struct Standby {
    bool in_recovery = false;
    bool replayed = false;
    std::optional<absl::Time> last_commit;
  };
  absl::StatusOr<Standby> standby =
      GuardPg("checking the standby", [&]() -> absl::StatusOr<Standby> {
        RETURN_IF_ERROR(ConnectForChecks(standby_check_, options_.standby_url));
        pqxx::nontransaction tx(*standby_check_);
        std::optional<std::string> lsn;
        if (primary.ok()) lsn = primary->lsn;
        const pqxx::row row = tx.exec_params1(
            absl::StrCat("SELECT pg_is_in_recovery(), "
                         "coalesce(pg_last_wal_replay_lsn() >= $1::pg_lsn, "
                         "false), ",
                         EpochMicrosSql("pg_last_xact_replay_timestamp()")),
            lsn);
        Standby s;
        s.in_recovery = row[0].as<bool>();
        s.replayed = row[1].as<bool>();
        if (!row[2].is_null()) {
          s.last_commit = absl::FromUnixMicros(row[2].as<int64_t>());
        }
        return s;
      });
  if (!standby.ok()) {
    standby_check_.reset();
    *why = absl::StrCat("does not answer (", standby.status().message(), ")");
    return Verdict::kUnreachable;
  }
  if (!standby->in_recovery) {
    // Promoted, perhaps: with several hosts and
    // target_session_attrs=prefer-standby, new connections find the
    // standby there is now.
    standby_check_.reset();
    pool_.CloseIdle();
    *why = "is not in recovery (a primary, not a hot standby)";
    return Verdict::kNotStandby;
  }
  if (!primary.ok()) {
    absl::MutexLock lock(&mu_);
    lag_seen_.reset();
    *why = absl::StrCat("lag unknown: ", primary.status().message());
    return Verdict::kUse;
  }
  const absl::Duration lag =
      lag_.Observe(primary->now, standby->replayed, standby->last_commit);
  {
    absl::MutexLock lock(&mu_);
    lag_seen_ = lag;
  }
  if (lag > options_.max_lag) {
    *why = lag == absl::InfiniteDuration()
               ? "has replayed nothing since it started"
               : absl::StrCat("lags ", Seconds(lag), " (the limit is ",
                              Seconds(options_.max_lag), ")");
    return Verdict::kLagging;
  }
  *why = absl::StrCat("lag ", Seconds(lag));
  return Verdict::kUse;
}

void ReadReplica::Decide(Verdict verdict, std::string why) {
  std::string line;
  {
    absl::MutexLock lock(&mu_);
    verdict_ = verdict;
    decided_at_ = absl::Now();
    if (verdict == reported_) return;
    reported_ = verdict;
    line = verdict == Verdict::kUse
               ? absl::StrCat("reads go to the standby (", why, ")")
               : absl::StrCat("reads go to the primary: the standby ", why);
  }
  if (options_.on_change) options_.on_change(line);
}

}  // namespace metrics::storage::pg

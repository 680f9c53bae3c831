// The ingest writer's per-group statements against a real PostgreSQL whose
// tables hold many rows (a row per stream and per series ever ingested):
// each look-up probes its key with an index scan, under the custom plans of
// a prepared statement's first runs and the generic plan it then settles
// on. As joins, the look-ups were planned as a hash of the
// keys and a scan of the whole table in every group commit
// (docs/benchmarks.md, "Statements that stay index probes").
#include <pqxx/connection>
#include <pqxx/nontransaction>
#include <pqxx/result>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/pg/connection.h"
#include "storage/pg/ingest/group_commit.h"
#include "storage/pg/prepared.h"
#include "storage/pg/sql_arrays.h"
#include "tests/testing/test_database.h"

namespace metrics::storage::pg {
namespace {

using ::metrics::test_util::TestDatabase;
using ::testing::HasSubstr;
using ::testing::Not;

class WriterPlansTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(db_, TestDatabase::Create());
    conn_ = std::make_unique<pqxx::connection>(db_->url());
    pqxx::nontransaction tx(*conn_);
    // 20 000 streams and series of 2 000 trials, as after a few weeks.
    tx.exec(
        "INSERT INTO ingest_positions (trial_id, stream_id, last_sequence) "
        "SELECT g % 2000, 'stream-' || g, 1 FROM generate_series(1, 20000) g");
    tx.exec(
        "INSERT INTO series (trial_id, metric_group, agent_id, gpu_uuid, "
        "name, unit) SELECT g % 2000, 'system', 'agent-' || g / 25, '', "
        "'series-' || g % 25, '' FROM generate_series(1, 20000) g");
    tx.exec("ANALYZE");
    // In SQL: libpqxx prepares its own on first use, out of EXPLAIN's reach.
    for (const PreparedStatement& s : GroupCommitter::Statements()) {
      tx.exec(absl::StrCat("PREPARE ", s.name, " AS ", s.sql));
    }
  }

  // The plans of `name` run with `args`, custom and generic.
  std::vector<std::string> Plans(const std::string& name,
                                 const std::vector<std::string>& args) {
    pqxx::nontransaction tx(*conn_);
    std::vector<std::string> plans;
    for (const char* mode : {"force_custom_plan", "force_generic_plan"}) {
      tx.exec(absl::StrCat("SET plan_cache_mode = ", mode));
      std::string plan = absl::StrCat(mode, ":\n");
      for (const auto& row : tx.exec(absl::StrCat(
               "EXPLAIN EXECUTE ", name, "(",
               absl::StrJoin(args, ", ",
                             [&tx](std::string* out, const std::string& a) {
                               out->append(tx.quote(a));
                             }),
               ")"))) {
        absl::StrAppend(&plan, row[0].c_str(), "\n");
      }
      plans.push_back(std::move(plan));
    }
    return plans;
  }

  std::unique_ptr<TestDatabase> db_;
  std::unique_ptr<pqxx::connection> conn_;
};

// Every `step`th of the 20 000 (trial, `prefix` + number) keys SetUp made,
// as the arrays of trials and names a statement takes.
std::vector<std::string> KeyArrays(const std::string& prefix, int step) {
  std::vector<int64_t> trials;
  std::vector<std::string> names;
  for (int g = 1; g <= 20000; g += step) {
    trials.push_back(g % 2000);
    names.push_back(absl::StrCat(prefix, g));
  }
  return {IntArray(trials), TextArray(names)};
}

TEST_F(WriterPlansTest, StreamPositionsAreReadByKey) {
  // A group of 100 streams.
  for (const std::string& plan :
       Plans("read_positions", KeyArrays("stream-", 200))) {
    EXPECT_THAT(plan, HasSubstr("Index Scan using ingest_positions_pkey"));
    EXPECT_THAT(plan, Not(HasSubstr("Seq Scan on ingest_positions")));
  }
}

TEST_F(WriterPlansTest, SeriesAreLookedUpByTheirLabels) {
  std::vector<int64_t> trials;
  std::vector<std::string> groups, agents, gpus, names;
  for (int g = 1; g <= 2500; ++g) {  // 100 agents' 25 series
    trials.push_back(g % 2000);
    groups.push_back("system");
    agents.push_back(absl::StrCat("agent-", g / 25));
    gpus.push_back("");
    names.push_back(absl::StrCat("series-", g % 25));
  }
  for (const std::string& plan :
       Plans("series_look_up", {IntArray(trials), TextArray(groups),
                                TextArray(agents), TextArray(gpus),
                                TextArray(names)})) {
    EXPECT_THAT(plan, HasSubstr("Index Scan using series_labels_key"));
    EXPECT_THAT(plan, Not(HasSubstr("Seq Scan on series")));
  }
}

// A writer connection's statements settle on a plan made for the tables as
// they were then: on a table of a few rows (a new database), that was a
// sequential scan, kept as the table grew until autovacuum analyzed it.
// KeyedAccessSettings keep it a probe of the key.
TEST_F(WriterPlansTest, PlansMadeWhileATableWasTinyStillProbeOnceItGrew) {
  {
    pqxx::nontransaction tx(*conn_);
    tx.exec("ALTER TABLE ingest_positions SET (autovacuum_enabled = false)");
    tx.exec("TRUNCATE ingest_positions");
    tx.exec(
        "INSERT INTO ingest_positions (trial_id, stream_id, last_sequence) "
        "SELECT g, 'stream-' || g, 1 FROM generate_series(1, 4) g");
    tx.exec("ANALYZE ingest_positions");
  }
  const auto settled_plan = [&](const std::vector<SessionSetting>& settings) {
    absl::StatusOr<std::unique_ptr<pqxx::connection>> writer = Connect(
        db_->url(), "writer", GroupCommitter::Statements(), settings);
    EXPECT_OK(writer);
    if (!writer.ok()) return std::string();
    pqxx::nontransaction tx(**writer);
    for (int i = 0; i < 10; ++i) {  // past the custom plans of the first runs
      tx.exec_prepared("read_positions", IntArray({1, 2}),
                       TextArray({"stream-1", "stream-2"}));
    }
    tx.exec(
        "INSERT INTO ingest_positions (trial_id, stream_id, last_sequence) "
        "SELECT g % 2000, 'stream-' || g, 1 FROM generate_series(5, 20000) g");
    std::string plan;
    for (const auto& row : tx.exec(
             "EXPLAIN EXECUTE read_positions('{1, 2}', '{stream-1, stream-2}')")) {
      absl::StrAppend(&plan, row[0].c_str(), "\n");
    }
    tx.exec("DELETE FROM ingest_positions WHERE last_sequence = 1 AND "
            "stream_id <> ALL('{stream-1, stream-2, stream-3, stream-4}')");
    return plan;
  };
  // The hazard, on a connection without them.
  EXPECT_THAT(settled_plan({}), HasSubstr("Seq Scan on ingest_positions"));
  const std::string plan = settled_plan(KeyedAccessSettings());
  EXPECT_THAT(plan, HasSubstr("Index Scan using ingest_positions_pkey"));
  EXPECT_THAT(plan, Not(HasSubstr("Seq Scan")));
}

// Custom plans know the arrays' lengths, and PostgreSQL kept choosing them
// for the writer's statements: a planning at every call. A writer
// connection plans each statement once.
TEST_F(WriterPlansTest, AWriterConnectionPlansEachStatementOnce) {
  const auto plans_of_read_positions = [&](const std::vector<SessionSetting>& settings) {
    absl::StatusOr<std::unique_ptr<pqxx::connection>> writer = Connect(
        db_->url(), "writer", GroupCommitter::Statements(), settings);
    EXPECT_OK(writer);
    if (!writer.ok()) return std::pair<int, int>{-1, -1};
    pqxx::nontransaction tx(**writer);
    for (int i = 0; i < 12; ++i) {
      // Groups of one or two streams, as from a few busy ones.
      std::vector<std::string> args = KeyArrays("stream-", i % 2 == 0 ? 10000 : 20000);
      tx.exec_prepared("read_positions", args[0], args[1]);
    }
    const pqxx::row counts = tx.exec1(
        "SELECT custom_plans, generic_plans FROM pg_prepared_statements "
        "WHERE name = 'read_positions'");
    return std::pair<int, int>{counts[0].as<int>(), counts[1].as<int>()};
  };
  // The hazard, with the keyed-access settings alone: more custom plans
  // than the five of the first runs.
  EXPECT_GT(plans_of_read_positions(KeyedAccessSettings()).first, 5);
  EXPECT_EQ(plans_of_read_positions(GroupCommitter::SessionSettings()),
            (std::pair<int, int>{0, 12}));
}

}  // namespace
}  // namespace metrics::storage::pg

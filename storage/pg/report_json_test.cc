// The raw-row JSON format round trip: what ReportJson writes, PostgreSQL's
// jsonb stores and ReportValueSql reads back is the same double for every
// series, including an agent-wide value beside GPU values of the same name
// and labels that need quoting; a series the report lacks reads as NULL.
#include "storage/report_json.h"

#include <optional>
#include <pqxx/connection>
#include <pqxx/nontransaction>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "tests/testing/test_database.h"

namespace metrics::storage {
namespace {

using ::metrics::test_util::TestDatabase;

// The value of series `s` in `json`, read by ReportValueSql from a jsonb.
std::optional<double> ReadBack(pqxx::nontransaction& tx,
                               const std::string& json,
                               const SeriesDeclaration& s) {
  const pqxx::row row = tx.exec1(absl::StrCat(
      "SELECT ", ReportValueSql("m", tx.quote(s.name), tx.quote(s.gpu_uuid)),
      " FROM (SELECT ", tx.quote(json), "::jsonb AS m) r"));
  if (row[0].is_null()) return std::nullopt;
  return row[0].as<double>();
}

TEST(ReportJsonTest, EveryValueReadsBackExactly) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<TestDatabase> db,
                       TestDatabase::Create());
  pqxx::connection conn(db->url());
  pqxx::nontransaction tx(conn);

  MetricBatch batch;
  batch.agent_id = "agent-1";
  batch.series = {{"cpu_util_simple", "", "percent"},
                  {"gpu_util", "GPU-0", "percent"},
                  {"gpu_util", "", "percent"},  // agent-wide, beside GPUs
                  {"gpu_util", "GPU-'1\"\\", "percent"},
                  {"it's", "", "bytes"},
                  {"absent", "", "bytes"}};
  Report report;
  report.time_us = 1763800000000000;
  report.series = {0, 1, 2, 3, 4};
  report.values = {0.1 + 0.2, 1e-300, -0.0, 97.123456789012345, 1.7e308};
  const std::string json = ReportJson(batch, report);

  for (size_t i = 0; i < report.series.size(); ++i) {
    const SeriesDeclaration& s = batch.series[report.series[i]];
    std::optional<double> value = ReadBack(tx, json, s);
    ASSERT_TRUE(value.has_value())
        << s.name << "/" << s.gpu_uuid << " in " << json;
    EXPECT_EQ(*value, report.values[i]) << s.name << "/" << s.gpu_uuid;
  }
  EXPECT_EQ(ReadBack(tx, json, batch.series[5]), std::nullopt);
  // A GPU the report lacks, of a name it has: NULL, not the agent-wide value.
  EXPECT_EQ(ReadBack(tx, json, {"gpu_util", "GPU-9", "percent"}), std::nullopt);
  EXPECT_EQ(ReadBack(tx, json, {"cpu_util_simple", "GPU-0", "percent"}),
            std::nullopt);
}

}  // namespace
}  // namespace metrics::storage

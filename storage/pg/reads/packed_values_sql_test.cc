// The SQL side of the packed raw rows (migration 0004): metrics_unpack gives
// the same doubles, bit for bit, as the C++ decoder; metrics_packed_json
// gives the jsonb shape rows had before, which ReportValueSql reads back
// exactly, including an agent-wide value beside GPU values of the same name
// and labels that need quoting; a series the report lacks reads as NULL.
#include <pqxx/connection>
#include <pqxx/nontransaction>

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "storage/format/packed_report.h"
#include "storage/pg/sql_arrays.h"
#include "storage/report_json.h"
#include "storage/pg/testing/sql_decoder_test.h"

namespace metrics::storage::pg {
namespace {

using PackedValuesSqlTest = test_util::SqlDecoderTest;

TEST_F(PackedValuesSqlTest, SqlDecodesEveryDoubleAsTheServerDoes) {
  pqxx::nontransaction tx(*conn_);
  std::mt19937_64 random(5);
  std::vector<SeriesValue> values;
  for (double v : {0.0, -0.0, 5e-324, -2.2250738585072014e-308, 1e-300,
                   std::numeric_limits<double>::max(),
                   std::numeric_limits<double>::infinity(),
                   -std::numeric_limits<double>::infinity(), 0.1 + 0.2, 37.2,
                   -3.5, 16106127360.0, 1484783566848.0, 999999.999999,
                   9007199254740991.0, 9007199254740990.0 * 512}) {
    values.emplace_back(static_cast<int64_t>(values.size()) + 1, v);
  }
  while (values.size() < 3000) {
    double v;
    if (values.size() % 2 == 0) {
      const uint64_t bits = random();
      std::memcpy(&v, &bits, sizeof v);
      if (std::isnan(v)) continue;
    } else if (values.size() % 5 == 0) {  // byte counts in pages or MiB
      v = static_cast<double>((random() >> 30) << (random() % 24));
    } else {
      v = static_cast<double>(static_cast<int64_t>(random() % 2000000001) -
                              1000000000) /
          std::pow(10, random() % 8);
    }
    // Id steps of 1 to 100 000: one- to three-byte headers.
    values.emplace_back(values.back().first + 1 +
                            static_cast<int64_t>(random() % (values.size() % 3 == 0 ? 100000 : 3)),
                        v);
  }
  const pqxx::result rows = tx.exec_params(
      "SELECT series_id, encode(float8send(value), 'hex') "
      "FROM metrics_unpack($1::bytea)",
      ByteaHex(PackReport(values)));
  ASSERT_EQ(rows.size(), values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(rows[i][0].as<int64_t>(), values[i].first) << i;
    EXPECT_EQ(rows[i][1].as<std::string>(), test_util::Float8SendHex(values[i].second))
        << "value " << i << ": " << values[i].second;
  }
}

TEST_F(PackedValuesSqlTest, CorruptBytesAreAnErrorNotAWrongAnswer) {
  pqxx::nontransaction tx(*conn_);
  for (const std::string& bytes :
       {std::string(), std::string("\x03", 1), std::string("\x01\x10", 2),
        std::string("\x01\x17\x01\x02", 4)}) {
    EXPECT_THROW(tx.exec_params("SELECT * FROM metrics_unpack($1::bytea)",
                                ByteaHex(bytes)),
                 pqxx::sql_error)
        << bytes.size();
  }
}

// The value of a series in the jsonb metrics_packed_json makes of `packed`,
// read by ReportValueSql.
std::optional<double> ReadBack(pqxx::nontransaction& tx,
                               const std::string& packed,
                               const std::string& name,
                               const std::string& gpu_uuid) {
  const pqxx::row row = tx.exec_params1(
      absl::StrCat("SELECT ",
                   ReportValueSql("m", tx.quote(name), tx.quote(gpu_uuid)),
                   " FROM (SELECT metrics_packed_json(1, $1::bytea) AS m) r"),
      ByteaHex(packed));
  if (row[0].is_null()) return std::nullopt;
  return row[0].as<double>();
}

TEST_F(PackedValuesSqlTest, TheJsonOfAPackedRowIsTheOldShapeExactly) {
  pqxx::nontransaction tx(*conn_);
  struct Series {
    std::string name, gpu_uuid;
    double value;
    int64_t id = 0;
  };
  std::vector<Series> series = {{"cpu_util_simple", "", 0.1 + 0.2},
                                {"gpu_util", "GPU-0", 1e-300},
                                {"gpu_util", "", -0.0},  // agent-wide, beside GPUs
                                {"gpu_util", "GPU-'1\"\\", 97.123456789012345},
                                {"it's", "", 1.7e308},
                                {"absent", "", 0}};
  tx.exec("INSERT INTO trials (id) VALUES (1)");
  for (Series& s : series) {
    s.id = tx.exec_params1(
                 "INSERT INTO series (trial_id, metric_group, agent_id, "
                 "gpu_uuid, name) VALUES (1, 'system', 'agent-1', $1, $2) "
                 "RETURNING series_id",
                 s.gpu_uuid, s.name)[0]
               .as<int64_t>();
  }
  std::vector<SeriesValue> values;
  for (size_t i = 0; i + 1 < series.size(); ++i) {
    values.emplace_back(series[i].id, series[i].value);
  }
  const std::string packed = PackReport(values);
  for (size_t i = 0; i + 1 < series.size(); ++i) {
    std::optional<double> value =
        ReadBack(tx, packed, series[i].name, series[i].gpu_uuid);
    ASSERT_TRUE(value.has_value()) << series[i].name << "/" << series[i].gpu_uuid;
    EXPECT_EQ(*value, series[i].value) << series[i].name;
  }
  EXPECT_EQ(ReadBack(tx, packed, "absent", ""), std::nullopt);
  // A GPU the report lacks, of a name it has: NULL, not the agent-wide value.
  EXPECT_EQ(ReadBack(tx, packed, "gpu_util", "GPU-9"), std::nullopt);
  EXPECT_EQ(ReadBack(tx, packed, "cpu_util_simple", "GPU-0"), std::nullopt);
  EXPECT_EQ(tx.exec_params1("SELECT metrics_packed_json(1, $1::bytea)::text",
                            ByteaHex(PackReport({{series[0].id, 12.5}})))[0]
                .as<std::string>(),
            "{\"cpu_util_simple\": 12.5}");
}

}  // namespace
}  // namespace metrics::storage::pg

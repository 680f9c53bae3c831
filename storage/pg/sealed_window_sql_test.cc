// The SQL decoder of sealed windows (metrics_unseal and metrics_sealed_times,
// migration 0007) against the C++ one: the same reports, times, series and
// doubles bit for bit (NaN as NaN: SQL keeps no payload, as metrics_unpack
// does), batch indexes as series 0, over special doubles, sparse series and
// a realistic 10-minute window, whose decoding time it prints.
#include <pqxx/connection>
#include <pqxx/nontransaction>

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "storage/format/sealed_window.h"
#include "storage/pg/sql_arrays.h"
#include "storage/pg/testing/sql_decoder_test.h"

namespace metrics::storage::pg {
namespace {

class SealedWindowSqlTest : public test_util::SqlDecoderTest {
 protected:

  // Decodes `reports` sealed, in SQL and in C++, and expects the same rows.
  void ExpectSqlAgrees(const std::vector<WindowReport>& reports) {
    pqxx::nontransaction tx(*conn_);
    const std::string sealed = SealWindow(reports);
    const pqxx::result rows = tx.exec_params(
        "SELECT report, time_us, series_id, encode(float8send(value), 'hex'), "
        "value = 'NaN' FROM metrics_unseal($1::bytea)",
        ByteaHex(sealed));
    // The C++ answer in the SQL's order: by series (0: batch indexes), then
    // report.
    std::vector<std::tuple<int, int64_t, int64_t, double>> expected;
    std::map<int64_t, std::vector<std::tuple<int, int64_t, double>>> by_series;
    for (size_t i = 0; i < reports.size(); ++i) {
      const WindowReport& r = reports[i];
      const int report = static_cast<int>(i) + 1;
      if (r.batch.has_value()) by_series[0].emplace_back(report, r.time_us, *r.batch);
      for (const auto& [id, value] : r.values) {
        by_series[id].emplace_back(report, r.time_us, value);
      }
    }
    for (const auto& [id, values] : by_series) {
      for (const auto& [report, time, value] : values) {
        expected.emplace_back(report, time, id, value);
      }
    }
    ASSERT_EQ(rows.size(), expected.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto& [report, time, id, value] = expected[i];
      ASSERT_EQ(rows[i][0].as<int>(), report) << i;
      ASSERT_EQ(rows[i][1].as<int64_t>(), time) << i;
      ASSERT_EQ(rows[i][2].as<int64_t>(), id) << i;
      if (std::isnan(value)) {
        ASSERT_TRUE(rows[i][4].as<bool>()) << i;
      } else {
        ASSERT_EQ(rows[i][3].as<std::string>(), test_util::Float8SendHex(value)) << i << ": " << value;
      }
    }
    // Every report's time, values or none.
    const pqxx::result times = tx.exec_params(
        "SELECT report, time_us FROM metrics_sealed_times($1::bytea) ORDER BY report",
        ByteaHex(sealed));
    ASSERT_EQ(times.size(), reports.size());
    for (size_t i = 0; i < reports.size(); ++i) {
      ASSERT_EQ(times[i][0].as<size_t>(), i + 1);
      ASSERT_EQ(times[i][1].as<int64_t>(), reports[i].time_us) << i;
    }
  }

};

TEST_F(SealedWindowSqlTest, EveryDoubleAndSparseSeriesAsTheCppDecoderGivesThem) {
  const double specials[] = {0.0, -0.0, std::numeric_limits<double>::infinity(),
                             -std::numeric_limits<double>::infinity(),
                             std::numeric_limits<double>::quiet_NaN(),
                             std::numeric_limits<double>::denorm_min(),
                             -2.2250738585072014e-308, std::numeric_limits<double>::max(),
                             1.0 / 3, 0.1, 16106127360, -12.75};
  std::mt19937_64 random(11);
  std::vector<WindowReport> reports;
  for (int i = 0; i < 200; ++i) {
    WindowReport r{1763800000000000 + i * 1000000 + static_cast<int64_t>(random() % 3000), {}};
    r.values.emplace_back(1, specials[i % std::size(specials)]);
    double any;
    const uint64_t bits = random();
    std::memcpy(&any, &bits, sizeof any);
    r.values.emplace_back(2, any);
    if (i % 3 == 0) r.values.emplace_back(3, std::round(i * 0.25 * 100) / 100);
    r.values.emplace_back(40, std::round(70 + 20 * std::sin(i / 9.0)));
    reports.push_back(std::move(r));
  }
  ExpectSqlAgrees(reports);
  ExpectSqlAgrees({});
  ExpectSqlAgrees({{-7, {{5, -1.5}}}});
  // Batch indexes (column 0), and a report with neither batch nor values.
  ExpectSqlAgrees({{10, {{2, 1.0}}, 41}, {20, {}}, {30, {}, -3}, {40, {{2, 4.5}}}});
}

TEST_F(SealedWindowSqlTest, ARealisticTenMinutesAndHowLongSqlTakes) {
  std::mt19937_64 random(13);
  std::uniform_real_distribution<double> noise(-1, 1);
  std::vector<WindowReport> reports;
  for (int i = 0; i < 600; ++i) {
    WindowReport r{1763800000412345 + i * 1000000 + static_cast<int64_t>(random() % 3000), {}};
    const double seconds = 1 + std::abs(noise(random)) * 0.003;
    r.values.emplace_back(1, 100.0 * (4000 + 300 * noise(random)) / 8000);
    r.values.emplace_back(2, std::round((5e7 + 1e7 * noise(random)) / 4096) * 4096 / seconds);
    r.values.emplace_back(3, std::round((6 + noise(random)) * 100) / 100);
    // A GPU that misses some reports: its series have bitmaps.
    for (int g = 0; g < (i % 9 == 4 ? 7 : 8); ++g) {
      r.values.emplace_back(4 + 2 * g, std::round(70 + 15 * noise(random)));
      r.values.emplace_back(5 + 2 * g, std::round((20 + g + noise(random)) * 512) * (2 << 20));
    }
    reports.push_back(std::move(r));
  }
  ExpectSqlAgrees(reports);
  size_t expected_values = 0;
  for (const WindowReport& r : reports) expected_values += r.values.size();
  pqxx::nontransaction tx(*conn_);
  const std::string hex = ByteaHex(SealWindow(reports));
  // As a parameter, and as a stored row's value (TOASTed, as a sealed
  // window in metrics is).
  tx.exec("CREATE TEMP TABLE stored (sealed bytea)");
  tx.exec_params("INSERT INTO stored VALUES ($1)", hex);
  for (const char* from : {"$1::bytea", "(SELECT sealed FROM stored WHERE $1::bytea IS NOT NULL)"}) {
    const auto start = std::chrono::steady_clock::now();
    const pqxx::result count = tx.exec_params(
        absl::StrCat("SELECT count(*) FROM metrics_unseal(", from, ")"), hex);
    const double ms = std::chrono::duration<double, std::milli>(
                          std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(count[0][0].as<size_t>(), expected_values);
    std::printf("[ figures ] SQL decodes a 10-minute window of %lld values from %s in %.1f ms "
                "(%.2f us a value)\n",
                count[0][0].as<long long>(), from, ms, 1000 * ms / count[0][0].as<double>());
  }
}

}  // namespace
}  // namespace metrics::storage::pg

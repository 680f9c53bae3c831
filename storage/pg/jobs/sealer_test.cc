// The sealer on a real PostgreSQL, through the real ingest path: every
// reader (chart raw reads, the streamed export, legacy readings with their
// batch indexes, metrics_unpacked, the rollups a chart reads (stored ones
// and the raw rows the seal adds to them) and their rebuild, the
// independent SQL checks) sees after a seal exactly what it saw before, bit
// for bit; only closed windows are sealed; late rows are read at once and
// sealed again with their window; two sealers at once seal each window
// once; a pass cut off mid-way leaves every value once; dense windows and
// long gaps read whole; a dense window is sealed in parts within the
// sealer's memory budget, and an agent with many rows waiting early, its
// open window too; raw retention removes a window once all of it is
// before the horizon; migrating down writes the windows back as rows.
#include "storage/pg/jobs/sealer.h"

#include <pqxx/connection>
#include <pqxx/nontransaction>
#include <pqxx/transaction>

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/retry_after.h"
#include "common/testing/eventually.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/format/sealed_window.h"
#include "storage/pg/jobs/raw_retention.h"
#include "storage/pg/jobs/rollup_rebuild.h"
#include "storage/pg/jobs/seal_trigger.h"
#include "storage/pg/reads/agent_reports.h"
#include "storage/pg/sql_time.h"
#include "storage/pg/testing/pg_checks.h"
#include "storage/pg/testing/store_test.h"
#include "migrations/migrator.h"
#include "tests/testing/test_database.h"

namespace metrics::storage::pg {
namespace {

namespace test_util = ::metrics::storage::pg::test_util;
using test_util::kT0;

constexpr int64_t kWindowUs = int64_t{kSealedWindowSeconds} * 1000000;

uint64_t Bits(double v) {
  uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

// Collects a streamed read as (series, time, value bits).
// A rollup read's buckets, merged by (agent, start, series) as a chart
// merges them.
class Buckets : public RollupSink {
 public:
  void Restart() override { buckets.clear(); }
  void Take(const RollupRow& row) override {
    for (const auto& [id, stats] : row.stats) {
      const auto [it, added] = buckets.try_emplace({row.agent_id, row.bucket_start_us, id}, stats);
      if (!added) it->second.Merge(stats);
    }
  }
  // Sums to 12 digits: a seal adds them up in another order.
  std::string Text() const {
    std::string text;
    for (const auto& [key, s] : buckets) {
      absl::StrAppendFormat(&text, "%s/%d/%d: %d %.12g %a %a %d %a %d %a\n", std::get<0>(key),
                            std::get<1>(key), std::get<2>(key), s.count, s.sum, s.min, s.max,
                            s.first_time_us, s.first_value, s.last_time_us, s.last_value);
    }
    return text;
  }
  std::map<std::tuple<std::string, int64_t, int64_t>, RollupStats> buckets;
};

class Collect : public RawSampleSink {
 public:
  absl::Status Take(size_t series, const Sample& s) override {
    taken.emplace_back(series, s.time_us, Bits(s.value));
    return absl::OkStatus();
  }
  std::vector<std::tuple<size_t, int64_t, uint64_t>> taken;
};

class SealerTest : public test_util::StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    MakeTrial(7);
  }
  void TearDown() override {
    Exec("TRUNCATE raw_retention");  // the fixture's tables do not include it
    StoreTest::TearDown();
  }

  // `reports` reports of `agent` a second apart from kT0 + `offset_s`, on
  // the agent's stream from sequence `first_sequence`, in batches of 50:
  // an agent-wide series with full-precision doubles, two GPUs' integers
  // (one GPU missing from every seventh report), a series that appears
  // late, and, with `batches`, a training batch index in each report.
  void Ingest(const std::string& agent, int64_t offset_s, int reports, int64_t first_sequence,
              bool batches = false, absl::Duration every = absl::Seconds(1)) {
    std::mt19937_64 random(offset_s * 31 + reports);
    std::uniform_real_distribution<double> any(-1e6, 1e6);
    for (int start = 0; start < reports; start += 50) {
      MetricBatch batch;
      batch.stream_id = agent + "-stream";
      batch.sequence = first_sequence + start / 50;
      batch.trial_id = 7;
      batch.agent_id = agent;
      batch.series = {{"cpu_util_simple", "", "percent"},
                      {"gpu_util", "GPU-1", "percent"},
                      {"gpu_util", "GPU-2", "percent"},
                      {"memory_used", "", "bytes"}};
      for (int i = start; i < std::min(reports, start + 50); ++i) {
        Report r;
        r.time_us = absl::ToUnixMicros(kT0 + absl::Seconds(offset_s) + i * every) +
                    static_cast<int64_t>(random() % 5000);
        r.series = {0, 1};
        r.values = {any(random), static_cast<double>(random() % 101)};
        if (i % 7 != 3) {
          r.series.push_back(2);
          r.values.push_back(static_cast<double>(random() % 101));
        }
        if (i > reports / 2) {
          r.series.push_back(3);
          r.values.push_back(std::round(any(random)) * 4096);
        }
        if (batches) r.batch = 1000 + i;
        batch.reports.push_back(std::move(r));
      }
      ASSERT_EQ(Submit(std::move(batch)).kind, BatchOutcome::Kind::kStored);
    }
  }

  // `reports` reports of `agent` `every` apart from kT0 + `offset_s`, two
  // series each, in batches of 5000 on `store`: a dense agent.
  void IngestDense(MetricStore& store, const std::string& agent, int64_t offset_s, int reports,
                   absl::Duration every, const std::string& stream = "-stream") {
    for (int start = 0; start < reports; start += 5000) {
      MetricBatch batch;
      batch.stream_id = agent + stream;
      batch.sequence = 1 + start / 5000;
      batch.trial_id = 7;
      batch.agent_id = agent;
      batch.series = {{"cpu_util_simple", "", "percent"}, {"gpu_util", "GPU-1", "percent"}};
      for (int i = start; i < std::min(reports, start + 5000); ++i) {
        batch.reports.push_back(
            {absl::ToUnixMicros(kT0 + absl::Seconds(offset_s) + i * every), {0, 1},
             {static_cast<double>(i % 1000) / 8, static_cast<double>((i * 7) % 101)},
             std::nullopt});
      }
      ASSERT_EQ(Submit(store, std::move(batch)).kind, BatchOutcome::Kind::kStored);
    }
  }

  // Everything readers see of trial 7, values as bits.
  struct View {
    std::vector<std::vector<std::pair<int64_t, uint64_t>>> raw;
    std::vector<std::tuple<size_t, int64_t, uint64_t>> streamed;
    std::vector<std::tuple<size_t, int64_t, std::optional<int32_t>, uint64_t>> readings;
    std::string unpacked;
    std::string rollups;

    bool operator==(const View& o) const {
      return raw == o.raw && streamed == o.streamed && readings == o.readings &&
             unpacked == o.unpacked && rollups == o.rollups;
    }
  };

  // Names the first difference.
  static std::string Diff(const View& a, const View& b) {
    auto first = [](const auto& x, const auto& y) {
      size_t i = 0;
      while (i < x.size() && i < y.size() && x[i] == y[i]) ++i;
      return absl::StrCat("at ", i, " of ", x.size(), " and ", y.size());
    };
    if (a.raw != b.raw) return absl::StrCat("raw samples differ ", first(a.raw, b.raw));
    if (a.streamed != b.streamed) {
      return absl::StrCat("streamed samples differ ", first(a.streamed, b.streamed));
    }
    if (a.readings != b.readings) {
      return absl::StrCat("readings differ ", first(a.readings, b.readings));
    }
    if (a.unpacked != b.unpacked) {
      return absl::StrCat("metrics_unpacked differs ", first(a.unpacked, b.unpacked), ": ",
                          a.unpacked.substr(0, 300), "\n---\n", b.unpacked.substr(0, 300));
    }
    if (a.rollups != b.rollups) return "rollups differ";
    return "";
  }

  // Legacy readings are read in pages of `page` readings.
  View Read(size_t page_size = 7) {
    View view;
    absl::StatusOr<std::vector<SeriesInfo>> series =
        store_->Reads().ListSeries(7, /*extents=*/false, Deadline());
    EXPECT_OK(series);
    if (!series.ok()) return view;
    const int64_t from = absl::ToUnixMicros(kT0 - absl::Hours(1));
    const int64_t to = absl::ToUnixMicros(kT0 + absl::Hours(24 * 5));
    absl::StatusOr<std::vector<std::vector<Sample>>> raw =
        store_->Reads().ReadRawSamples(7, *series, from, to, 1000000, Deadline());
    EXPECT_OK(raw);
    if (raw.ok()) {
      for (const auto& samples : *raw) {
        auto& out = view.raw.emplace_back();
        for (const Sample& s : samples) out.emplace_back(s.time_us, Bits(s.value));
      }
    }
    Collect streamed;
    EXPECT_OK(store_->Reads().StreamRawSamples(7, *series, from, to, Deadline(), streamed));
    view.streamed = std::move(streamed.taken);
    // Legacy readings, in pages: the cursor crosses sealed windows.
    for (size_t i = 0; i < series->size(); ++i) {
      ReadingCursor cursor;
      while (true) {
        absl::StatusOr<std::vector<Reading>> page =
            store_->ReadReadings(7, (*series)[i], cursor, page_size, Deadline());
        EXPECT_OK(page);
        if (!page.ok() || page->empty()) break;
        for (const Reading& r : *page) {
          view.readings.emplace_back(i, r.time_us, r.batch, Bits(r.value));
        }
        cursor = {page->back().time_us, page->back().row_id, page->back().index};
      }
    }
    view.unpacked = Scalar(
        "SELECT string_agg(concat_ws('|', agent_id, end_time, total_batches, metrics), "
        "E'\\n' ORDER BY agent_id, end_time, metrics::text) FROM metrics_unpacked "
        "WHERE trial_id = 7");
    // The buckets a chart reads at every width: stored ones plus the raw
    // rows waiting for their seal.
    std::vector<std::string> agents;
    std::vector<int64_t> ids;
    for (const SeriesInfo& info : *series) {
      if (agents.empty() || agents.back() != info.agent_id) agents.push_back(info.agent_id);
      ids.push_back(info.series_id);
    }
    for (const int width : kRollupWidthsSeconds) {
      const int64_t w = int64_t{width} * 1000000;
      Buckets buckets;
      EXPECT_OK(store_->Reads().ReadRollups(7, agents, width, ids, AlignDown(from, w),
                                            AlignDown(to, w), Deadline(), buckets));
      absl::StrAppend(&view.rollups, width, ":", buckets.Text(), "\n");
    }
    return view;
  }

  // A pass sealing every window that ended before kT0 + `until_s`.
  SealSummary Seal(int64_t until_s) {
    SealOptions options;
    options.database_url = url();
    // The grace that puts the database's "now - grace" there.
    options.grace = absl::Now() - (kT0 + absl::Seconds(until_s));
    absl::StatusOr<SealSummary> summary = SealClosedWindows(options);
    EXPECT_OK(summary);
    return summary.value_or(SealSummary());
  }

  // An agent's reports read raw (as a fine chart, the export and legacy
  // reads do): how many, the most one page held, and whether they came in
  // storage order.
  struct Scanned {
    size_t reports = 0;
    size_t largest_page = 0;
    bool ordered = true;
  };
  Scanned Scan(const std::string& agent) {
    Scanned scanned;
    absl::StatusOr<std::vector<SeriesInfo>> series =
        store_->Reads().ListSeries(7, /*extents=*/false, Deadline());
    EXPECT_OK(series);
    if (!series.ok()) return scanned;
    std::vector<RawValueColumns::Series> wanted;
    for (const SeriesInfo& info : *series) {
      if (info.agent_id == agent) wanted.push_back({info.series_id, info.name, info.gpu_uuid});
    }
    pqxx::connection connection(url());
    pqxx::read_transaction tx(connection);
    AgentReportScan scan(tx, 7, agent, wanted, kYearOneMicros, kYearTenThousandMicros,
                         /*prepared=*/false);
    std::vector<StoredReport> page;
    std::optional<std::tuple<int64_t, int64_t, int32_t>> last;
    while (true) {
      absl::StatusOr<bool> more = scan.Next(page);
      EXPECT_OK(more);
      if (!more.ok() || !*more) break;
      scanned.reports += page.size();
      scanned.largest_page = std::max(scanned.largest_page, page.size());
      for (const StoredReport& r : page) {
        if (last.has_value() && !(*last < r.key())) scanned.ordered = false;
        last = r.key();
      }
    }
    return scanned;
  }

  int64_t Count(absl::string_view form) {
    return std::stoll(Scalar(absl::StrCat(
        "SELECT count(*) FROM metrics_profiling WHERE trial_id = 7 AND ", form)));
  }
};

TEST_F(SealerTest, ReadersSeeSealedWindowsAsTheRawRowsTheyReplace) {
  Ingest("agent-a", 0, 1500, 1, /*batches=*/true);  // 25 minutes
  Ingest("agent-b", 100, 700, 1);
  // Nothing is in the stored rollups yet: a rebuild leaves every row to
  // its seal.
  ASSERT_OK_AND_ASSIGN(const RebuildSummary rebuilt_before,
                       RebuildRollups(url(), 7, nullptr));
  EXPECT_EQ(rebuilt_before.samples, 0);
  const View before = Read();
  ASSERT_FALSE(before.streamed.empty());
  ASSERT_OK(test_util::CheckRollupsMatchRawRows(url(), 7));

  // Windows that ended by kT0 + 900 s are closed; the rest stay raw.
  const SealSummary first = Seal(900);
  const int64_t t0 = absl::ToUnixMicros(kT0);
  const int64_t closed_to = AlignDown(t0 + 900 * 1000000, kWindowUs);
  EXPECT_EQ(first.agents, 2);
  EXPECT_EQ(Count(absl::StrCat("sealed_values IS NOT NULL AND end_time >= ",
                               "timestamptz 'epoch' + ", closed_to, " * interval '1 microsecond'")),
            0);
  EXPECT_EQ(Count(absl::StrCat("packed_values IS NOT NULL AND end_time < ",
                               "timestamptz 'epoch' + ", closed_to, " * interval '1 microsecond'")),
            0);
  EXPECT_GT(Count("packed_values IS NOT NULL"), 0);
  EXPECT_EQ(first.windows, Count("sealed_values IS NOT NULL"));
  EXPECT_EQ(Diff(Read(), before), "");

  // Then everything: one row a window, no raw row left.
  Seal(3600);
  EXPECT_EQ(Count("packed_values IS NOT NULL"), 0);
  const int64_t windows_a = (AlignDown(t0 + 1499 * 1000000 + 5000, kWindowUs) -
                             AlignDown(t0, kWindowUs)) / kWindowUs + 1;
  const int64_t windows_b = (AlignDown(t0 + 799 * 1000000 + 5000, kWindowUs) -
                             AlignDown(t0 + 100 * 1000000, kWindowUs)) / kWindowUs + 1;
  EXPECT_EQ(Count("sealed_values IS NOT NULL"), windows_a + windows_b);
  const View after = Read();
  EXPECT_EQ(Diff(after, before), "");
  EXPECT_EQ(after.readings, before.readings);  // batch indexes and all
  EXPECT_EQ(after.unpacked, before.unpacked);

  // The independent SQL checks and a rebuild read the sealed windows too.
  ASSERT_OK_AND_ASSIGN(const int64_t buckets, test_util::CheckRollupsMatchRawRows(url(), 7));
  EXPECT_GT(buckets, 0);
  EXPECT_EQ(test_util::CountRawValues(url(), 7).value_or(-1),
            static_cast<int64_t>(before.streamed.size()));
  EXPECT_EQ(test_util::CountRepeatedReports(url(), 7).value_or(-1), 0);
  ASSERT_OK_AND_ASSIGN(const RebuildSummary rebuilt_after, RebuildRollups(url(), 7, nullptr));
  EXPECT_EQ(rebuilt_after.reports, rebuilt_before.reports);
  EXPECT_EQ(rebuilt_after.samples, static_cast<int64_t>(before.streamed.size()));
  EXPECT_EQ(Read().rollups, before.rollups);

  // A pass with nothing to seal changes nothing.
  EXPECT_EQ(Seal(3600).windows, 0);
}

// /metrics' latest values and the agents' activity read each agent's newest
// 10 s of reports: from its raw rows, and once every window is sealed, from
// its newest sealed window, the same either way.
TEST_F(SealerTest, LatestValuesAndActivityAreTheSameFromRawRowsAndFromSealedWindows) {
  Ingest("agent-a", 0, 1300, 1);
  Ingest("agent-b", 100, 700, 1);
  using Latest = std::tuple<std::string, std::string, std::string, int64_t, uint64_t>;
  const auto read = [&] {
    std::vector<Latest> latest;
    absl::StatusOr<LatestValues> values = store_->LatestValuesOfActiveTrials(100, 0, Deadline());
    EXPECT_OK(values);
    if (values.ok()) {
      for (const LatestValue& v : values->values) {
        latest.emplace_back(v.agent_id, v.name, v.gpu_uuid, v.time_us, Bits(v.value));
      }
    }
    std::vector<std::pair<std::string, int64_t>> activity;
    absl::StatusOr<std::vector<AgentActivity>> agents = store_->AgentActivityOfTrials({7}, Deadline());
    EXPECT_OK(agents);
    if (agents.ok()) {
      for (const AgentActivity& a : *agents) activity.emplace_back(a.agent_id, a.last_sample_us);
    }
    return std::pair(latest, activity);
  };
  const auto raw = read();
  EXPECT_EQ(Count("sealed_values IS NOT NULL"), 0);
  ASSERT_EQ(raw.second.size(), 2u);
  // agent-a's last report is at 1299 s (and a few ms); its 4 series there.
  EXPECT_GE(raw.second[0].second, absl::ToUnixMicros(kT0 + absl::Seconds(1299)));
  EXPECT_EQ(std::count_if(raw.first.begin(), raw.first.end(),
                          [](const Latest& l) { return std::get<0>(l) == "agent-a"; }),
            4);
  Seal(3600);
  EXPECT_EQ(Count("packed_values IS NOT NULL"), 0);
  EXPECT_EQ(read(), raw);
}

TEST_F(SealerTest, LateRowsAreReadAtOnceAndSealedAgainWithTheirWindow) {
  Ingest("agent-a", 0, 1300, 1);
  Seal(3600);
  const int64_t sealed = Count("sealed_values IS NOT NULL");
  // Late reports into sealed windows (another stream of the same agent),
  // one at the very time of a sealed report.
  MetricBatch late;
  late.stream_id = "agent-a-late";
  late.sequence = 1;
  late.trial_id = 7;
  late.agent_id = "agent-a";
  late.series = {{"cpu_util_simple", "", "percent"}, {"gpu_util", "GPU-3", "percent"}};
  for (int i = 0; i < 30; ++i) {
    late.reports.push_back({absl::ToUnixMicros(kT0 + absl::Seconds(40 * i) + absl::Milliseconds(500)),
                            {0, 1}, {1.0 / (i + 3), 7.0 * i}, std::nullopt});
  }
  const int64_t at_a_sealed_time = std::stoll(Scalar(
      "SELECT min(time_us) FROM metrics_profiling m, metrics_unseal(m.sealed_values) u "
      "WHERE m.trial_id = 7 AND m.sealed_values IS NOT NULL"));
  late.reports.push_back({at_a_sealed_time, {0}, {-42.25}, std::nullopt});
  ASSERT_EQ(Submit(std::move(late)).kind, BatchOutcome::Kind::kStored);
  const View mixed = Read();
  EXPECT_EQ(Count("packed_values IS NOT NULL"), 31);
  ASSERT_OK(test_util::CheckRollupsMatchRawRows(url(), 7));

  const SealSummary again = Seal(3600);
  EXPECT_EQ(again.rows, 31);
  EXPECT_EQ(Count("packed_values IS NOT NULL"), 0);
  EXPECT_EQ(Count("sealed_values IS NOT NULL"), sealed);  // still one row a window
  const View resealed = Read();
  EXPECT_EQ(Diff(resealed, mixed), "");
  // The late value at a sealed report's time comes after it, as ingested.
  bool found = false;
  for (size_t i = 1; i < resealed.streamed.size(); ++i) {
    if (std::get<1>(resealed.streamed[i]) == at_a_sealed_time &&
        std::get<2>(resealed.streamed[i]) == Bits(-42.25)) {
      found = true;
      EXPECT_EQ(std::get<1>(resealed.streamed[i - 1]), at_a_sealed_time);
    }
  }
  EXPECT_TRUE(found);
  ASSERT_OK(test_util::CheckRollupsMatchRawRows(url(), 7));
}

TEST_F(SealerTest, TwoSealersAtOnceSealEachWindowOnce) {
  for (int a = 0; a < 6; ++a) Ingest(absl::StrCat("agent-", a), 17 * a, 900, 1);
  const View before = Read();
  std::thread other([&] { Seal(3600); });
  Seal(3600);
  other.join();
  EXPECT_EQ(Count("packed_values IS NOT NULL"), 0);
  EXPECT_EQ(Scalar("SELECT count(*) FROM (SELECT agent_id, end_time FROM metrics_profiling "
                   "WHERE trial_id = 7 AND sealed_values IS NOT NULL GROUP BY 1, 2 "
                   "HAVING count(*) > 1) twice"),
            "0");
  EXPECT_EQ(Diff(Read(), before), "");
}

TEST_F(SealerTest, APassCutOffMidwayLeavesEveryValueOnce) {
  for (int a = 0; a < 8; ++a) Ingest(absl::StrCat("agent-", a), 0, 3000, 1);
  const View before = Read(1000);
  // Cut the sealer's connection once it has sealed something: the
  // transaction in flight rolls back, the committed ones stay.
  SealOptions options;
  options.database_url = url();
  options.grace = absl::Now() - (kT0 + absl::Hours(2));
  options.windows_per_transaction = 1;
  bool cut = false;
  options.progress = [&](const SealProgress& p) {
    if (p.windows > 0 && !cut) {
      // This database's sealer only: tests beside this one seal too.
      EXPECT_GE(test_util::TerminateBackends(url(), "metrics-sealer").value_or(-1), 1);
      cut = true;
    }
  };
  const absl::StatusOr<SealSummary> cut_off = SealClosedWindows(options);
  options.progress = nullptr;
  EXPECT_FALSE(cut_off.ok());
  EXPECT_GT(Count("packed_values IS NOT NULL"), 0);
  EXPECT_EQ(Diff(Read(1000), before), "");
  EXPECT_EQ(test_util::CountRepeatedReports(url(), 7).value_or(-1), 0);

  ASSERT_OK_AND_ASSIGN(const SealSummary rest, SealClosedWindows(options));
  EXPECT_GT(rest.windows, 0);
  EXPECT_EQ(Count("packed_values IS NOT NULL"), 0);
  EXPECT_EQ(Diff(Read(1000), before), "");
}


TEST_F(SealerTest, DenseWindowsAndLongGapsAreReadWhole) {
  // 2500 reports in 250 s: more rows in a window than a page holds.
  Ingest("dense", 0, 2500, 1, false, absl::Milliseconds(100));
  // Two bursts three days apart: pages skip the empty windows between.
  Ingest("gaps", 30, 120, 1);
  Ingest("gaps", 3 * 86400, 120, 4);
  const View before = Read(1000);
  EXPECT_EQ(before.raw[0].size(), 2500u);  // dense's cpu_util_simple
  Seal(4 * 86400);
  EXPECT_EQ(Count("packed_values IS NOT NULL"), 0);
  EXPECT_EQ(Diff(Read(1000), before), "");
}

TEST_F(SealerTest, ADenseWindowIsSealedInPartsWithinTheMemoryBudget) {
  // 15 000 reports in 9 minutes of one window (kT0 + 200 s starts one),
  // a report every 36 ms: about 3 MB to hold at once, against a budget of
  // 256 KB.
  IngestDense(*store_, "dense", 210, 15000, absl::Milliseconds(36));
  const View before = Read(200000);
  ASSERT_EQ(before.raw[0].size(), 15000u);
  // Raw, the window is read a page of rows at a time.
  const Scanned raw = Scan("dense");
  EXPECT_EQ(raw.reports, 15000u);
  EXPECT_LE(raw.largest_page, 2000u);
  EXPECT_TRUE(raw.ordered);
  SealOptions options;
  options.database_url = url();
  options.grace = absl::Now() - (kT0 + absl::Hours(1));
  options.memory_budget_bytes = 256 << 10;
  ASSERT_OK_AND_ASSIGN(const SealSummary summary, SealClosedWindows(options));
  EXPECT_EQ(summary.rows, 15000);
  EXPECT_LE(summary.peak_held_bytes, options.memory_budget_bytes + 1024);
  EXPECT_GT(summary.peak_held_bytes, options.memory_budget_bytes / 2);
  EXPECT_GE(summary.parts, 8);
  EXPECT_EQ(Count("packed_values IS NOT NULL"), 0);
  const int64_t parts = Count("sealed_values IS NOT NULL");
  EXPECT_EQ(parts, summary.windows);
  EXPECT_GE(parts, 9);  // every part a row of the one window
  EXPECT_EQ(Scalar("SELECT count(DISTINCT end_time) FROM metrics_profiling WHERE trial_id = 7 "
                   "AND sealed_values IS NOT NULL"),
            "1");
  // Every value once, in order, and every bucket exact.
  EXPECT_EQ(Diff(Read(200000), before), "");
  EXPECT_EQ(test_util::CountRepeatedReports(url(), 7).value_or(-1), 0);
  ASSERT_OK(test_util::CheckRollupsMatchRawRows(url(), 7));
  // Sealed, a part at a time (some 1 300 reports each), not the window.
  const Scanned sealed = Scan("dense");
  EXPECT_EQ(sealed.reports, 15000u);
  EXPECT_LE(sealed.largest_page, static_cast<size_t>(15000 / parts * 2));
  EXPECT_TRUE(sealed.ordered);

  // Late rows join the window's smallest part, which fits the budget.
  IngestDense(*store_, "dense", 215, 40, absl::Milliseconds(1), "-late");
  const View late = Read(200000);
  ASSERT_OK_AND_ASSIGN(const SealSummary again, SealClosedWindows(options));
  EXPECT_EQ(again.rows, 40);
  EXPECT_EQ(Count("sealed_values IS NOT NULL"), parts);
  // Legacy readings in pages start each page at their cursor, inside a
  // part.
  EXPECT_EQ(Diff(Read(4999), late), "");
  ASSERT_OK(test_util::CheckRollupsMatchRawRows(url(), 7));
  EXPECT_EQ(Scan("dense").reports, 15040u);
}

TEST_F(SealerTest, AnAgentWithManyRowsWaitingIsSealedEarlyOpenWindowAndAll) {
  // A store whose writer counts what it stores, and a sealer loop whose
  // passes are an hour apart: only the trigger can seal in between.
  auto trigger = std::make_shared<SealTrigger>(5000);
  PgMetricStoreOptions store_options;
  store_options.writer.on_stored = [trigger](int32_t trial, const std::string& agent,
                                             int64_t reports) {
    trigger->Stored(trial, agent, reports);
  };
  std::unique_ptr<PgMetricStore> store = NewStore(std::move(store_options));
  SealOptions options;
  options.database_url = url();
  options.grace = absl::Hours(24 * 365 * 10);  // every window open to the passes
  SealerLoop loop(options, absl::Hours(1), trigger, [](const std::string&) {});
  IngestDense(*store, "sparse", 0, 300, absl::Seconds(1));
  // Batches of the threshold: whatever a seal took, what it left is a
  // batch or more, due again.
  IngestDense(*store, "dense", 210, 15000, absl::Milliseconds(20));
  const View before = Read(1000);
  // The dense agent's rows are sealed, the sparse one's (under the
  // trigger's count) wait for their window to close.
  EXPECT_TRUE(::metrics::test_util::Eventually(
      [&] {
        return Scalar("SELECT count(*) FROM metrics_profiling WHERE trial_id = 7 AND "
                      "agent_id = 'dense' AND packed_values IS NOT NULL") == "0";
      },
      absl::Seconds(30)));
  EXPECT_EQ(Scalar("SELECT count(*) FROM metrics_profiling WHERE trial_id = 7 AND "
                   "agent_id = 'sparse' AND packed_values IS NOT NULL"),
            "300");
  EXPECT_EQ(Diff(Read(1000), before), "");
  ASSERT_OK(test_util::CheckRollupsMatchRawRows(url(), 7));
  // Only the sparse agent is still counted.
  EXPECT_TRUE(::metrics::test_util::Eventually([&] { return trigger->agents() == 1; }, absl::Seconds(10)));
}

TEST(SealTriggerTest, NamesAnAgentOnceWhenItsWaitingRowsReachTheThreshold) {
  SealTrigger trigger(100, /*max_lag=*/absl::ZeroDuration());
  trigger.Stored(7, "a", 60);
  trigger.Stored(7, "b", 99);
  EXPECT_FALSE(trigger.NextDue(absl::Now()).has_value());
  trigger.Stored(7, "a", 50);
  EXPECT_OK(trigger.Admit(7, "a"));
  trigger.Stored(7, "a", 500);  // already due: named once
  // Past four times the threshold, the agent's batches are refused.
  EXPECT_THAT(trigger.Admit(7, "a"),
              ::metrics::test_util::StatusIs(absl::StatusCode::kResourceExhausted,
                                             ::testing::HasSubstr("agent a of trial 7 has 610")));
  // ... asking for a short wait, which the ingest doors pass on.
  EXPECT_EQ(common::RetryAfterOf(trigger.Admit(7, "a")), absl::Milliseconds(200));
  EXPECT_OK(trigger.Admit(7, "b"));
  const std::optional<SealTrigger::Due> due = trigger.NextDue(absl::Now());
  ASSERT_TRUE(due.has_value());
  EXPECT_EQ(due->agent, SealTrigger::Agent(7, "a"));
  EXPECT_EQ(due->waiting, 610);
  EXPECT_FALSE(trigger.NextDue(absl::Now()).has_value());
  // A seal takes off what it took, down to zero (another server's rows).
  trigger.Sealed(7, "a", 700);
  EXPECT_OK(trigger.Admit(7, "a"));
  trigger.Sealed(7, "b", 90);
  trigger.Stored(7, "b", 90);
  // A seal that took more than was counted (another server's rows too)
  // leaves zero, not a debt against the rows that come next.
  trigger.Stored(7, "d", 150);
  trigger.Sealed(7, "d", 500);
  trigger.Stored(7, "d", 100);
  const std::optional<SealTrigger::Due> d = trigger.NextDue(absl::Now());
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->waiting, 100);
  trigger.Sealed(7, "d", 100);
  EXPECT_FALSE(trigger.NextDue(absl::Now()).has_value());
  EXPECT_EQ(trigger.agents(), 1u);
  trigger.Stored(7, "b", 1);
  EXPECT_EQ(trigger.NextDue(absl::Now())->agent, SealTrigger::Agent(7, "b"));
  trigger.Stop();
  EXPECT_FALSE(trigger.NextDue(absl::InfiniteFuture()).has_value());
}

TEST(SealTriggerTest, AnAgentIsRefusedOnlyOnceTheSealerHasLaggedBehindItForMaxLag) {
  // An import in large batches on a quiet server: far past the count, but
  // the sealer has its lag to take them.
  SealTrigger patient(100, absl::Hours(1));
  patient.Stored(7, "a", 1000);
  EXPECT_OK(patient.Admit(7, "a"));
  SealTrigger strict(100, absl::Milliseconds(1));
  strict.Stored(7, "a", 1000);
  absl::SleepFor(absl::Milliseconds(5));  // past the lag: a wait that must happen
  EXPECT_THAT(strict.Admit(7, "a"),
              ::metrics::test_util::StatusIs(absl::StatusCode::kResourceExhausted,
                                             ::testing::HasSubstr("none sealed for")));
  strict.Sealed(7, "a", 100);  // progress: the lag starts again
  EXPECT_OK(strict.Admit(7, "a"));
}

TEST_F(SealerTest, RetentionRemovesASealedWindowOnceAllOfItIsBeforeTheHorizon) {
  Ingest("agent-a", 0, 1500, 1);
  Seal(3600);
  const int64_t t0 = absl::ToUnixMicros(kT0);
  const int64_t second = AlignDown(t0, kWindowUs) + kWindowUs;  // the second window's start
  const absl::Time horizon = absl::FromUnixMicros(second + 100 * 1000000);
  absl::StatusOr<std::vector<SeriesInfo>> series =
      store_->Reads().ListSeries(7, /*extents=*/false, Deadline());
  ASSERT_OK(series);
  const int64_t to = absl::ToUnixMicros(kT0 + absl::Hours(1));
  ASSERT_OK_AND_ASSIGN(const auto after_horizon,
                       store_->Reads().ReadRawSamples(7, *series, absl::ToUnixMicros(horizon),
                                                      to, 100000, Deadline()));
  const int64_t windows = Count("sealed_values IS NOT NULL");

  RetentionOptions retention;
  retention.database_url = url();
  retention.raw_retention = absl::Hours(1);
  retention.now = horizon + retention.raw_retention;
  ASSERT_OK_AND_ASSIGN(const RetentionSummary removed, ApplyRawRetention(retention));
  EXPECT_EQ(removed.horizon, horizon);
  // The first window went; the second, across the horizon, stays whole.
  EXPECT_EQ(removed.rows, 1);
  EXPECT_EQ(Count("sealed_values IS NOT NULL"), windows - 1);
  EXPECT_EQ(Count(absl::StrCat("end_time < timestamptz 'epoch' + ", second,
                               " * interval '1 microsecond'")),
            0);
  // Reads from the horizon on see every value they saw; before it, refused.
  ASSERT_OK_AND_ASSIGN(const auto kept,
                       store_->Reads().ReadRawSamples(7, *series, absl::ToUnixMicros(horizon),
                                                      to, 100000, Deadline()));
  ASSERT_EQ(kept.size(), after_horizon.size());
  for (size_t i = 0; i < kept.size(); ++i) {
    ASSERT_EQ(kept[i].size(), after_horizon[i].size()) << i;
    for (size_t j = 0; j < kept[i].size(); ++j) {
      EXPECT_EQ(kept[i][j].time_us, after_horizon[i][j].time_us);
      EXPECT_EQ(Bits(kept[i][j].value), Bits(after_horizon[i][j].value));
    }
  }
  EXPECT_FALSE(store_->Reads()
                   .ReadRawSamples(7, *series, absl::ToUnixMicros(horizon) - 1, to, 100000,
                                   Deadline())
                   .ok());
}

TEST_F(SealerTest, MigratingDownWritesSealedWindowsBackAsRowsOfTheirReports) {
  // A database of its own: the suite's stays at the current schema.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<::metrics::test_util::TestDatabase> db,
                       ::metrics::test_util::TestDatabase::Create());
  store_->Shutdown(Deadline());
  PgMetricStoreOptions options;
  options.database_url = db->url();
  store_ = NewStore(options);
  MakeTrial(7);
  Ingest("agent-a", 0, 1300, 1, /*batches=*/true);
  SealOptions seal;
  seal.database_url = db->url();
  seal.grace = absl::Now() - (kT0 + absl::Hours(1));
  ASSERT_OK(SealClosedWindows(seal));
  store_->Shutdown(Deadline());
  store_ = nullptr;
  const std::string rows_sql =
      "SELECT string_agg(concat_ws('|', agent_id, end_time, total_batches, metrics), "
      "E'\\n' ORDER BY agent_id, end_time, metrics::text) FROM metrics_unpacked";
  ASSERT_OK_AND_ASSIGN(const std::string sealed, test_util::QueryScalar(db->url(), rows_sql));
  ASSERT_OK_AND_ASSIGN(const std::string windows,
                       test_util::QueryScalar(db->url(), "SELECT count(*) FROM metrics "
                                                         "WHERE sealed_values IS NOT NULL"));
  ASSERT_GT(std::stoi(windows), 1);

  migrations::MigratorOptions down;
  down.database_url = db->url();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<migrations::Migrator> migrator,
                       migrations::Migrator::Create(down));
  ASSERT_OK(migrator->Down(6));
  EXPECT_EQ(test_util::QueryScalar(db->url(), rows_sql).value_or(""), sealed);
  EXPECT_EQ(test_util::QueryScalar(db->url(), "SELECT count(*) FROM metrics").value_or(""),
            "1300");
}

}  // namespace
}  // namespace metrics::storage::pg

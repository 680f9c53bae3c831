#include "storage/batch_validation.h"

#include <cmath>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/testing/json_file.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/declared_series.h"

namespace metrics::storage {
namespace {

using ::metrics::test_util::StatusIs;
using ::testing::HasSubstr;

const absl::Time kCheckedAt = absl::FromUnixSeconds(1800000000);

MetricBatch GoodBatch() {
  MetricBatch batch;
  batch.stream_id = "agent-1/stream";
  batch.sequence = 1;
  batch.trial_id = 7;
  batch.agent_id = "agent-1";
  batch.series = {{"cpu_util_simple", "", "percent"},
                  {"gpu_util", "GPU-aaaa", "percent"}};
  batch.reports = {{absl::ToUnixMicros(kCheckedAt - absl::Seconds(1)), {0, 1},
                    {12.5, 99}, std::nullopt},
                   {absl::ToUnixMicros(kCheckedAt), {1}, {100}, std::nullopt}};
  return batch;
}

absl::Status Check(const MetricBatch& batch) {
  return ValidateBatch(batch, IngestLimits(), kCheckedAt);
}

void ExpectInvalid(const MetricBatch& batch, absl::string_view message) {
  EXPECT_THAT(Check(batch), StatusIs(absl::StatusCode::kInvalidArgument,
                                     HasSubstr(std::string(message))));
}

TEST(BatchValidationTest, AcceptsAWellFormedBatch) { EXPECT_OK(Check(GoodBatch())); }

TEST(BatchValidationTest, RefusesNonFiniteValuesNamingTheValue) {
  MetricBatch batch = GoodBatch();
  batch.reports[0].values[1] = std::nan("");
  ExpectInvalid(batch, "batch.reports[0].values[1]: NaN is not a finite "
                       "number (series \"gpu_util\")");
  batch.reports[0].values[1] = -std::numeric_limits<double>::infinity();
  ExpectInvalid(batch, "batch.reports[0].values[1]: infinity");
}

// A stream's batch that shares its declarations (DeclaredSeries) is checked
// as if it carried them; valid labels are checked once and then remembered.
TEST(BatchValidationTest, ABatchSharingItsDeclarationsIsCheckedAsOneCarryingThem) {
  const auto share = [](MetricBatch batch) {
    batch.declared = DeclaredSeries::Create(batch.trial_id, batch.metric_group,
                                            batch.agent_id, batch.series);
    batch.series.clear();
    return batch;
  };
  MetricBatch batch = share(GoodBatch());
  EXPECT_FALSE(batch.declared->labels_valid());
  EXPECT_OK(Check(batch));
  EXPECT_TRUE(batch.declared->labels_valid());

  batch.reports[0].values[1] = std::nan("");
  ExpectInvalid(batch, "batch.reports[0].values[1]: NaN is not a finite "
                       "number (series \"gpu_util\")");
  batch = share(GoodBatch());
  batch.reports[1].series = {2};
  ExpectInvalid(batch, "index 2 is out of range; the batch declares 2 series");

  MetricBatch bad = GoodBatch();
  bad.series[1].name = "gpu util\n";
  bad = share(std::move(bad));
  for (int i = 0; i < 2; ++i) {  // refused each time, never remembered
    ExpectInvalid(bad, "batch.series[1].name");
    EXPECT_FALSE(bad.declared->labels_valid());
  }
  bad = GoodBatch();
  bad.series[1] = bad.series[0];
  ExpectInvalid(share(std::move(bad)), "declares series \"cpu_util_simple\" a second time");
}

TEST(BatchValidationTest, RefusesTimesOutsideTheWindow) {
  MetricBatch batch = GoodBatch();
  batch.reports[1].time_us = absl::ToUnixMicros(kCheckedAt + absl::Minutes(11));
  ExpectInvalid(batch, "batch.reports[1].time: 2027-01-15T08:11:00Z is more "
                       "than 10m ahead of the server's clock");
  batch.reports[1].time_us = 946684799000000;  // 1999-12-31
  ExpectInvalid(batch, "batch.reports[1].time: 1999-12-31T23:59:59Z is "
                       "before 2000-01-01");
}

TEST(BatchValidationTest, RefusesEmptyAndOversizedBatches) {
  MetricBatch batch = GoodBatch();
  batch.reports.clear();
  ExpectInvalid(batch, "batch.reports: must not be empty");

  batch = GoodBatch();
  batch.series.clear();
  ExpectInvalid(batch, "batch.series: must not be empty");

  IngestLimits limits;
  limits.max_reports_per_batch = 1;
  EXPECT_THAT(ValidateBatch(GoodBatch(), limits, kCheckedAt),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("batch.reports: 2 reports is more than the "
                                 "limit of 1")));
  limits = IngestLimits();
  limits.max_values_per_batch = 2;
  EXPECT_THAT(ValidateBatch(GoodBatch(), limits, kCheckedAt),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("3 values is more than the limit of 2")));
}

TEST(BatchValidationTest, RefusesAnUnknownMetricGroup) {
  MetricBatch batch = GoodBatch();
  batch.metric_group = "training";
  ExpectInvalid(batch, "batch.metric_group: \"training\" is not system, "
                       "timing or misc");
  batch.metric_group = "timing";
  EXPECT_OK(Check(batch));
}

TEST(BatchValidationTest, RefusesMismatchedOrBadIndexes) {
  MetricBatch batch = GoodBatch();
  batch.reports[0].series.pop_back();
  ExpectInvalid(batch, "batch.reports[0]: has 1 series indexes but 2 values");

  batch = GoodBatch();
  batch.reports[1].series[0] = 2;
  ExpectInvalid(batch, "batch.reports[1].series[0]: index 2 is out of range");

  batch = GoodBatch();
  batch.reports[0].series = {1, 1};
  ExpectInvalid(batch, "batch.reports[0].series[1]: series 1 has a second "
                       "value");

  batch = GoodBatch();
  batch.reports[0].series.clear();
  batch.reports[0].values.clear();
  ExpectInvalid(batch, "batch.reports[0].values: must not be empty");
}

TEST(BatchValidationTest, RefusesBadLabels) {
  MetricBatch batch = GoodBatch();
  batch.agent_id = "";
  ExpectInvalid(batch, "batch.agent_id: must not be empty");
  batch.agent_id = std::string(129, 'a');
  ExpectInvalid(batch, "batch.agent_id: is 129 characters long; the limit is "
                       "128");
  batch.agent_id = "agent\n1";
  ExpectInvalid(batch, "batch.agent_id: has a non-printable character (byte "
                       "10) at offset 5");

  batch = GoodBatch();
  batch.series[1].name = "";
  ExpectInvalid(batch, "batch.series[1].name: must not be empty");
  batch.series[1].name = " gpu";
  ExpectInvalid(batch, "batch.series[1].name: must not start or end with a "
                       "space");

  batch = GoodBatch();
  batch.series[1].gpu_uuid = "GPU-\xc3\xa9";
  ExpectInvalid(batch, "batch.series[1].gpu_uuid: has a non-printable");

  batch = GoodBatch();
  batch.series[1] = batch.series[0];
  ExpectInvalid(batch, "batch.series[1]: declares series \"cpu_util_simple\" "
                       "a second time");

  batch = GoodBatch();
  batch.trial_id = 0;
  ExpectInvalid(batch, "batch.trial_id: must be a positive trial id");
  batch = GoodBatch();
  batch.sequence = 0;
  ExpectInvalid(batch, "batch.sequence: must be 1 or more");
}

// The shared label cases (client/testdata/labels.json) as a series' name
// (or unit, for the unit-length cases): refused naming the reason, or kept.
TEST(BatchValidationTest, EverySharedLabelCaseAsASeriesName) {
  const boost::json::value table = test_util::ReadJsonFile(LABEL_CASES);
  ASSERT_FALSE(table.is_null());
  for (const boost::json::value& c : table.at("cases").as_array()) {
    if (c.as_object().contains("allow_empty")) continue;  // names may not be empty
    const std::string value(c.at("value").as_string());
    SCOPED_TRACE("\"" + value + "\"");
    MetricBatch batch = GoodBatch();
    const bool unit = c.at("max").as_int64() == 32;
    (unit ? batch.series[1].unit : batch.series[1].name) = value;
    const absl::Status status = Check(batch);
    if (c.as_object().contains("problem")) {
      EXPECT_THAT(status.message(),
                  HasSubstr(absl::StrCat("batch.series[1].", unit ? "unit" : "name", ": ",
                                         std::string(c.at("problem").as_string()))));
    } else {
      EXPECT_OK(status);
    }
  }
}

}  // namespace
}  // namespace metrics::storage

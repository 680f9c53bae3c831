// PendingBatch's packed labels: what goes in comes back, byte for byte and
// in order, packed they take a fraction of the declarations' memory, and a
// batch whose declarations have their ids is left packed.
#include "storage/pg/ingest/pending_batch.h"

#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "storage/declared_series.h"

namespace metrics::storage::pg {
namespace {

using Labels = std::vector<std::tuple<std::string, std::string, std::string>>;

Labels LabelsOf(const std::vector<SeriesDeclaration>& series) {
  Labels labels;
  for (const SeriesDeclaration& s : series) {
    labels.emplace_back(s.name, s.gpu_uuid, s.unit);
  }
  return labels;
}

// An 8-GPU agent's declarations, with real-looking UUIDs.
std::vector<SeriesDeclaration> EightGpuAgent() {
  std::vector<SeriesDeclaration> series;
  for (const char* name : {"cpu_util_simple", "memory_free", "disk_iops",
                           "disk_throughput_read", "disk_throughput_write",
                           "net_throughput_sent", "net_throughput_recv",
                           "load_avg", "open_files"}) {
    series.push_back({name, "", "percent"});
  }
  for (int g = 0; g < 8; ++g) {
    const std::string uuid =
        absl::StrCat("GPU-5f3c1c4e-8f2b-1d2e-9a3b-4c5d6e7f8a9", g);
    series.push_back({"gpu_util", uuid, "percent"});
    series.push_back({"gpu_free_memory", uuid, "bytes"});
  }
  return series;
}

TEST(PendingBatchTest, PackedLabelsComeBackAsTheyWere) {
  std::vector<SeriesDeclaration> series = EightGpuAgent();
  // Lengths that take varints of two and three bytes, empty labels, and
  // bytes beyond ASCII.
  series.push_back({std::string(200, 'n'), std::string(20000, 'u'), ""});
  series.push_back({"temperature_\xc2\xb0""C", "", ""});
  series.push_back({"", "", "x"});
  series.push_back({"", "", "x"});
  series.push_back({"gpu_util", "GPU-a", ""});
  PendingBatch pending;
  pending.batch.series = series;
  pending.batch.agent_id = "host-a";
  pending.batch.reports = {{1000, {0, 1}, {1.5, 2.5}, std::nullopt}};

  pending.PackSeries();
  EXPECT_TRUE(pending.batch.series.empty());
  EXPECT_EQ(pending.batch.series.capacity(), 0u);  // the strings are freed
  ASSERT_NE(pending.batch.declared, nullptr);
  EXPECT_EQ(pending.batch.SeriesCount(), series.size());
  // The rest of the batch is left as it is.
  EXPECT_EQ(pending.batch.agent_id, "host-a");
  EXPECT_EQ(pending.batch.reports[0].values, (std::vector<double>{1.5, 2.5}));

  pending.UnpackSeries();
  EXPECT_EQ(LabelsOf(pending.batch.series), LabelsOf(series));
  // Unpacking what is unpacked changes nothing.
  pending.UnpackSeries();
  EXPECT_EQ(LabelsOf(pending.batch.series), LabelsOf(series));
}

TEST(PendingBatchTest, ABatchWithoutSeriesPacksToNothing) {
  PendingBatch pending;
  pending.PackSeries();
  EXPECT_EQ(pending.batch.declared, nullptr);
  pending.UnpackSeries();
  EXPECT_TRUE(pending.batch.series.empty());
}

TEST(PendingBatchTest, ABatchWhoseDeclarationsHaveIdsIsNotUnpacked) {
  PendingBatch pending;
  pending.batch.trial_id = 7;
  pending.batch.agent_id = "host-a";
  pending.batch.series = EightGpuAgent();
  pending.PackSeries();
  EXPECT_EQ(pending.KnownIds(), nullptr);
  std::vector<int64_t> ids(25);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = 100 + 2 * i;
  pending.batch.declared->PublishIds(ids);
  ASSERT_NE(pending.KnownIds(), nullptr);
  EXPECT_EQ(pending.KnownIds()->id(24), 148);
  pending.UnpackSeries();
  EXPECT_TRUE(pending.batch.series.empty());  // the writer needs no labels
  // Ids found for another agent's labels are not this batch's.
  pending.batch.agent_id = "host-b";
  EXPECT_EQ(pending.KnownIds(), nullptr);
  pending.UnpackSeries();
  EXPECT_EQ(pending.batch.series.size(), 25u);
}

TEST(PendingBatchTest, PackedLabelsTakeAFractionOfTheDeclarations) {
  PendingBatch pending;
  pending.batch.series = EightGpuAgent();
  // What the declarations hold at the least: three string headers each and
  // the characters of labels too long to sit inside their header.
  size_t declared = pending.batch.series.size() * sizeof(SeriesDeclaration);
  for (const SeriesDeclaration& s : pending.batch.series) {
    for (const std::string* label : {&s.name, &s.gpu_uuid, &s.unit}) {
      if (label->size() > 15) declared += label->size() + 1;
    }
  }
  pending.PackSeries();
  ASSERT_NE(pending.batch.declared, nullptr);
  const size_t packed = pending.batch.declared->packed_bytes();
  EXPECT_LT(packed * 3, declared)
      << packed << " bytes packed, " << declared
      << " declared";
}

}  // namespace
}  // namespace metrics::storage::pg

// Agent inventories in the store: stored with their batch, the newest per
// trial and agent kept, none from a refused batch, and read back whole.
#include <pqxx/connection>
#include <pqxx/nontransaction>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/notification.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/pg/pg_metric_store.h"
#include "tests/testing/test_database.h"

namespace metrics::storage::pg {
namespace {

using ::metrics::test_util::TestDatabase;
using ::testing::HasSubstr;

using ::metrics::test_util::kT0;

AgentInventory Inventory(absl::string_view driver) {
  AgentInventory inventory;
  inventory.host_name = "node-1";
  inventory.agent_version = "metrics-agent 1.0.0";
  inventory.cpu_model = "Intel(R) Xeon(R) Platinum 8480+";
  inventory.cpu_sockets = 2;
  inventory.cpu_count = 224;
  inventory.memory_total_bytes = int64_t{2} << 40;
  inventory.driver_version = std::string(driver);
  inventory.cuda_version = "12.4";
  inventory.gpus = {{0, "GPU-a", "NVIDIA H100 80GB HBM3", int64_t{80} << 30,
                     "disabled", {}},
                    {1, "GPU-b", "NVIDIA H100 80GB HBM3", int64_t{80} << 30,
                     "enabled", {"MIG-1", "MIG-2"}}};
  return inventory;
}

class AgentInventoriesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(db_, TestDatabase::Create());
    PgMetricStoreOptions options;
    options.database_url = db_->url();
    options.clock = [] { return kT0 + absl::Hours(1); };
    store_ = PgMetricStore::Create(std::move(options));
    ASSERT_OK(store_->CreateTrial(7, Deadline()).status());
  }
  void TearDown() override {
    if (store_ != nullptr) store_->Shutdown(Deadline());
  }

  static absl::Time Deadline() { return absl::Now() + absl::Seconds(30); }

  static MetricBatch Batch(int64_t sequence, absl::string_view agent,
                           std::optional<AgentInventory> inventory) {
    MetricBatch batch;
    batch.stream_id = absl::StrCat(agent, "-stream");
    batch.sequence = sequence;
    batch.trial_id = 7;
    batch.agent_id = std::string(agent);
    batch.series = {{"cpu_util_simple", "", "percent"}};
    batch.reports = {{absl::ToUnixMicros(kT0 + absl::Seconds(sequence)), {0},
                      {12.5}, std::nullopt}};
    if (inventory.has_value()) {
      batch.inventory = std::make_shared<AgentInventory>(*std::move(inventory));
    }
    return batch;
  }

  // Submits `batches` together (one group commit when the writer is idle)
  // and returns their outcomes.
  std::vector<BatchOutcome> Submit(std::vector<MetricBatch> batches) {
    std::vector<BatchOutcome> outcomes(batches.size());
    absl::BlockingCounter outstanding(static_cast<int>(batches.size()));
    for (size_t b = 0; b < batches.size(); ++b) {
      EXPECT_OK(store_->SubmitBatch(std::move(batches[b]), [&, b](BatchOutcome o) {
        outcomes[b] = std::move(o);
        outstanding.DecrementCount();
      }));
    }
    outstanding.Wait();
    return outcomes;
  }

  std::unique_ptr<TestDatabase> db_;
  std::unique_ptr<PgMetricStore> store_;
};

TEST_F(AgentInventoriesTest, TheNewestOfEachAgentIsKept) {
  EXPECT_EQ(Submit({Batch(1, "node-1", Inventory("550.54.15"))})[0].kind,
            BatchOutcome::Kind::kStored);
  // A batch without one leaves it; a later one replaces it; two in one
  // group keep the later.
  std::vector<BatchOutcome> outcomes =
      Submit({Batch(2, "node-1", std::nullopt),
              Batch(3, "node-1", Inventory("555.1")),
              Batch(4, "node-1", Inventory("560.2")),
              Batch(1, "node-2", Inventory("550.54.15"))});
  for (const BatchOutcome& o : outcomes) {
    EXPECT_EQ(o.kind, BatchOutcome::Kind::kStored) << o.status;
  }
  ASSERT_OK_AND_ASSIGN(std::vector<StoredInventory> stored,
                       store_->InventoriesOfTrial(7, Deadline()));
  ASSERT_EQ(stored.size(), 2u);
  EXPECT_EQ(stored[0].agent_id, "node-1");
  EXPECT_EQ(stored[0].inventory, Inventory("560.2"));
  EXPECT_GT(stored[0].received_at_us, 0);
  EXPECT_EQ(stored[1].agent_id, "node-2");
  EXPECT_EQ(stored[1].inventory, Inventory("550.54.15"));
  ASSERT_OK_AND_ASSIGN(std::vector<StoredInventory> none,
                       store_->InventoriesOfTrial(8, Deadline()));
  EXPECT_TRUE(none.empty());
}

// An operator reads it with SQL: the document's keys are the API's.
TEST_F(AgentInventoriesTest, TheStoredDocumentIsReadableJson) {
  ASSERT_EQ(Submit({Batch(1, "node-1", Inventory("550.54.15"))})[0].kind,
            BatchOutcome::Kind::kStored);
  pqxx::connection conn(db_->url());
  pqxx::nontransaction tx(conn);
  const pqxx::row row = tx.exec1(
      "SELECT inventory->>'driverVersion', inventory->'gpus'->1->>'name', "
      "inventory->'gpus'->1->'migDevices'->>1 FROM agent_inventories "
      "WHERE trial_id = 7 AND agent_id = 'node-1'");
  EXPECT_EQ(row[0].as<std::string>(), "550.54.15");
  EXPECT_EQ(row[1].as<std::string>(), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(row[2].as<std::string>(), "MIG-2");
}

// A bad inventory refuses its batch, naming the field; nothing of the batch
// is stored, and the inventory kept before stays.
TEST_F(AgentInventoriesTest, ABadInventoryRefusesItsBatch) {
  ASSERT_EQ(Submit({Batch(1, "node-1", Inventory("550.54.15"))})[0].kind,
            BatchOutcome::Kind::kStored);
  AgentInventory bad = Inventory("999");
  bad.gpus[1].name = "H100\n";
  BatchOutcome refused = Submit({Batch(2, "node-1", bad)})[0];
  EXPECT_EQ(refused.kind, BatchOutcome::Kind::kRejected);
  EXPECT_THAT(refused.status.message(),
              HasSubstr("batch.inventory.gpus[1].name: has a control character"));
  AgentInventory many = Inventory("999");
  many.gpus.resize(kMaxInventoryGpus + 1);
  refused = Submit({Batch(3, "node-1", many)})[0];
  EXPECT_EQ(refused.kind, BatchOutcome::Kind::kRejected);
  EXPECT_THAT(refused.status.message(), HasSubstr("batch.inventory.gpus: 65 GPUs"));
  AgentInventory negative = Inventory("999");
  negative.memory_total_bytes = -1;
  refused = Submit({Batch(4, "node-1", negative)})[0];
  EXPECT_THAT(refused.status.message(),
              HasSubstr("batch.inventory.memory_total_bytes: -1 is negative"));
  ASSERT_OK_AND_ASSIGN(std::vector<StoredInventory> stored,
                       store_->InventoriesOfTrial(7, Deadline()));
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].inventory, Inventory("550.54.15"));
  pqxx::connection conn(db_->url());
  pqxx::nontransaction tx(conn);
  EXPECT_EQ(tx.exec1("SELECT count(*) FROM metrics WHERE trial_id = 7")[0]
                .as<int>(),
            1);
}

TEST(AgentInventoryJsonTest, RoundTripsAndIgnoresUnknownKeys) {
  const AgentInventory inventory = Inventory("550.54.15");
  ASSERT_OK_AND_ASSIGN(AgentInventory back,
                       InventoryFromJson(InventoryToJson(inventory)));
  EXPECT_EQ(back, inventory);
  ASSERT_OK_AND_ASSIGN(AgentInventory newer,
                       InventoryFromJson(R"({"hostName":"n","future":[1]})"));
  EXPECT_EQ(newer.host_name, "n");
  EXPECT_FALSE(InventoryFromJson("[1]").ok());
  EXPECT_FALSE(InventoryFromJson("{").ok());
}

}  // namespace
}  // namespace metrics::storage::pg

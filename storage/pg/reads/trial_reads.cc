#include "storage/pg/reads/trial_reads.h"

#include <pqxx/result>
#include <pqxx/transaction>

#include <utility>

#include "absl/strings/str_cat.h"
#include "storage/pg/sql_time.h"
#include "storage/pg/trial_rows.h"
#include "storage/report_json.h"

namespace metrics::storage::pg {

namespace {

struct TrialStatements {
  PreparedStatement trial_by_id{
      "trial_by_id",
      absl::StrCat("SELECT ", TrialColumnsSql(), " FROM trials WHERE id = $1")};
  // The trial's columns, then the stream's last sequence (NULL for a new
  // stream); relies on the primary keys of both tables.
  PreparedStatement stream_start{
      "stream_start",
      absl::StrCat("SELECT ", TrialColumnsSql(),
                   ", (SELECT last_sequence FROM ingest_positions p "
                   "WHERE p.trial_id = $1 AND p.stream_id = $2) "
                   "FROM trials WHERE id = $1")};
  // By the primary key (trial_id, agent_id).
  PreparedStatement inventories{
      "inventories",
      absl::StrCat("SELECT agent_id, inventory::text, ",
                   EpochMicrosSql("received_at"),
                   " FROM agent_inventories WHERE trial_id = $1 "
                   "ORDER BY agent_id")};

  std::vector<PreparedStatement> All() const { return {trial_by_id, stream_start, inventories}; }
};

const TrialStatements& TrialSql() {
  static const auto* statements = new TrialStatements();
  return *statements;
}

}  // namespace

std::vector<PreparedStatement> PgTrialReads::Statements() { return TrialSql().All(); }

absl::StatusOr<Trial> PgTrialReads::GetTrial(int32_t id, absl::Time deadline) {
  return Run<Trial>(
      absl::StrCat("reading trial ", id), deadline,
      [&](pqxx::transaction_base& tx) -> absl::StatusOr<Trial> {
        pqxx::result r = tx.exec_prepared(TrialSql().trial_by_id.name, id);
        if (r.empty()) {
          return absl::NotFoundError(absl::StrCat("trial ", id, " does not exist"));
        }
        return TrialFromRow(r[0]);
      });
}

absl::StatusOr<StreamStart> PgTrialReads::GetStreamStart(
    int32_t trial_id, absl::string_view stream_id, absl::Time deadline) {
  return Run<StreamStart>(
      absl::StrCat("reading the start of stream ", stream_id), deadline,
      [&](pqxx::transaction_base& tx) -> absl::StatusOr<StreamStart> {
        pqxx::result r = tx.exec_prepared(TrialSql().stream_start.name, trial_id,
                                          std::string(stream_id));
        if (r.empty()) {
          return absl::NotFoundError(
              absl::StrCat("trial ", trial_id, " does not exist"));
        }
        StreamStart start;
        start.trial = TrialFromRow(r[0]);
        const pqxx::field position = r[0][kTrialColumns];
        start.position = position.is_null() ? 0 : position.as<int64_t>();
        return start;
      });
}

absl::StatusOr<std::vector<StoredInventory>> PgTrialReads::InventoriesOfTrial(
    int32_t trial_id, absl::Time deadline) {
  return Run<std::vector<StoredInventory>>(
      absl::StrCat("reading the agent inventories of trial ", trial_id),
      deadline,
      [&](pqxx::transaction_base& tx)
          -> absl::StatusOr<std::vector<StoredInventory>> {
        std::vector<StoredInventory> inventories;
        for (const auto& row :
             tx.exec_prepared(TrialSql().inventories.name, trial_id)) {
          absl::StatusOr<AgentInventory> inventory =
              InventoryFromJson(row[1].as<std::string>());
          if (!inventory.ok()) return inventory.status();
          inventories.push_back({trial_id, row[0].as<std::string>(),
                                 *std::move(inventory),
                                 row[2].as<int64_t>()});
        }
        return inventories;
      });
}

}  // namespace metrics::storage::pg

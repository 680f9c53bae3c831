#include "storage/pg/ingest/pending_batch.h"

#include "storage/declared_series.h"

namespace metrics::storage::pg {

void PendingBatch::PackSeries() {
  if (batch.series.empty()) return;
  batch.declared = DeclaredSeries::Create(batch.trial_id, batch.metric_group,
                                          batch.agent_id, batch.series);
  std::vector<SeriesDeclaration>().swap(batch.series);
}

const DeclaredSeries* PendingBatch::KnownIds() const {
  if (batch.declared == nullptr || !batch.declared->ids_known() ||
      !batch.declared->Of(batch.trial_id, batch.metric_group, batch.agent_id)) {
    return nullptr;
  }
  return batch.declared.get();
}

void PendingBatch::UnpackSeries() {
  if (!batch.series.empty() || batch.declared == nullptr ||
      KnownIds() != nullptr) {
    return;
  }
  batch.series = batch.declared->Unpack();
}

}  // namespace metrics::storage::pg

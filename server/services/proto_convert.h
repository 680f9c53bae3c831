// Conversions between the metrics.v1 protos and the store's domain types.
// Handlers call these and nothing else touches both worlds.
//
// Thread-safety: pure functions.
#ifndef METRICS_SERVER_SERVICES_PROTO_CONVERT_H_
#define METRICS_SERVER_SERVICES_PROTO_CONVERT_H_

#include <memory>
#include <optional>

#include "absl/status/status.h"

#include "proto/metrics/v1/ingest.pb.h"
#include "proto/metrics/v1/query.pb.h"
#include "query/query_engine.h"
#include "query/summary.h"
#include "proto/metrics/v1/trials.pb.h"
#include "storage/metric_store.h"

namespace metrics::server {


storage::MetricBatch BatchFromProto(const v1::SystemMetricsBatch& proto);
// The same, taking the strings out of `proto` instead of copying them.
storage::MetricBatch BatchFromProto(v1::SystemMetricsBatch&& proto);
// A batch of an ingest stream of trial `trial_id`: its declarations are
// `declared`, the stream's last ones, when it repeats them, else new
// ones that replace them in `declared` (storage::DeclaredSeries); its
// `series` is left empty. A batch naming another trial gets declarations of
// its own (the stream refuses it).
storage::MetricBatch StreamBatchFromProto(
    v1::SystemMetricsBatch&& proto, int32_t trial_id,
    std::shared_ptr<const storage::DeclaredSeries>& declared);

// The inventory of a batch, and a stored one for GetTrial.
storage::AgentInventory InventoryFromProto(v1::AgentInventory&& proto);
void InventoryToProto(const storage::StoredInventory& stored,
                      v1::AgentInventory* proto);

void TrialToProto(const storage::Trial& trial, v1::Trial* proto);

void SeriesToProto(const storage::SeriesInfo& series, v1::Series* proto);

query::QueryRequest QueryFromProto(const v1::QuerySeriesRequest& proto);
query::QueryRequest QueryFromProto(const v1::ExportSamplesRequest& proto);
query::QueryRequest QueryFromProto(const v1::ExportTraceRequest& proto);

// INVALID_ARGUMENT naming the field for a view that is neither FULL nor
// CHART (proto3 enums take any number).
absl::Status CheckView(v1::QuerySeriesRequest::View view);
// INVALID_ARGUMENT for a resolution_us that is negative, without a start,
// or of more than 10 000 buckets from start to end (or `now`).
absl::Status CheckResolution(const v1::QuerySeriesRequest& request,
                             absl::Time now);

// `view` CHART leaves out the columns a chart does not draw.
void QueryResultToProto(const query::QueryResult& result,
                        v1::QuerySeriesRequest::View view,
                        v1::QuerySeriesResponse* proto);

query::SummaryRequest SummaryFromProto(const v1::SummarizeSeriesRequest& proto);

// INVALID_ARGUMENT naming the field for a group neither TRIAL nor AGENT.
absl::Status CheckGroup(v1::SummarizeSeriesRequest::Group group);

void SummaryToProto(const query::SummaryResult& result,
                    v1::QuerySeriesRequest::View view,
                    v1::QuerySeriesResponse* proto);

// nullopt for STATE_UNSPECIFIED or an unknown value.
std::optional<storage::TrialState> TrialStateFromProto(v1::Trial::State state);

}  // namespace metrics::server

#endif  // METRICS_SERVER_SERVICES_PROTO_CONVERT_H_

#include "server/services/proto_convert.h"

#include <numeric>

#include "absl/strings/str_cat.h"
#include "common/proto_time.h"
#include "storage/declared_series.h"

namespace metrics::server {

using common::MicrosToProto;
using common::TimeFromProto;

storage::MetricBatch BatchFromProto(const v1::SystemMetricsBatch& proto) {
  v1::SystemMetricsBatch copy = proto;
  return BatchFromProto(std::move(copy));
}

namespace {

// All of `proto` but its series declarations.
storage::MetricBatch BatchWithoutSeries(v1::SystemMetricsBatch& proto) {
  storage::MetricBatch batch;
  batch.sequence = proto.sequence();
  batch.trial_id = proto.trial_id();
  batch.agent_id = std::move(*proto.mutable_agent_id());
  batch.reports.reserve(proto.reports_size());
  for (const v1::SystemMetricsReport& r : proto.reports()) {
    storage::Report report;
    // Stored to the microsecond: the edge rounds down, once.
    report.time_us = absl::ToUnixMicros(TimeFromProto(r.time()));
    if (r.series().empty() && r.values_size() == proto.series_size()) {
      // Without indexes: a value for each declared series, in order. (Any
      // other count is left for validation to refuse.)
      report.series.resize(r.values_size());
      std::iota(report.series.begin(), report.series.end(), uint32_t{0});
    } else {
      report.series.assign(r.series().begin(), r.series().end());
    }
    report.values.assign(r.values().begin(), r.values().end());
    batch.reports.push_back(std::move(report));
  }
  if (proto.has_inventory()) {
    batch.inventory = std::make_shared<storage::AgentInventory>(
        InventoryFromProto(std::move(*proto.mutable_inventory())));
  }
  return batch;
}

}  // namespace

storage::MetricBatch BatchFromProto(v1::SystemMetricsBatch&& proto) {
  storage::MetricBatch batch = BatchWithoutSeries(proto);
  batch.series.reserve(proto.series_size());
  for (v1::SeriesDeclaration& s : *proto.mutable_series()) {
    batch.series.push_back({std::move(*s.mutable_name()),
                            std::move(*s.mutable_gpu_uuid()),
                            std::move(*s.mutable_unit())});
  }
  return batch;
}

storage::MetricBatch StreamBatchFromProto(
    v1::SystemMetricsBatch&& proto, int32_t trial_id,
    std::shared_ptr<const storage::DeclaredSeries>& declared) {
  storage::MetricBatch batch = BatchWithoutSeries(proto);
  if (batch.trial_id != 0) trial_id = batch.trial_id;
  const auto labels_at = [&proto](size_t i) {
    const v1::SeriesDeclaration& s = proto.series(static_cast<int>(i));
    return storage::DeclaredSeries::Labels{s.name(), s.gpu_uuid(), s.unit()};
  };
  const size_t count = static_cast<size_t>(proto.series_size());
  if (declared == nullptr ||
      !declared->Repeats(trial_id, batch.metric_group, batch.agent_id, count,
                         labels_at)) {
    declared = storage::DeclaredSeries::Create(
        trial_id, batch.metric_group, batch.agent_id, count, labels_at,
        storage::DeclaredSeries::Keeper::kStream);
  }
  batch.declared = declared;
  return batch;
}

storage::AgentInventory InventoryFromProto(v1::AgentInventory&& proto) {
  storage::AgentInventory inventory;
  inventory.host_name = std::move(*proto.mutable_host_name());
  inventory.agent_version = std::move(*proto.mutable_agent_version());
  inventory.cpu_model = std::move(*proto.mutable_cpu_model());
  inventory.cpu_sockets = proto.cpu_sockets();
  inventory.cpu_count = proto.cpu_count();
  inventory.memory_total_bytes = proto.memory_total_bytes();
  inventory.driver_version = std::move(*proto.mutable_driver_version());
  inventory.cuda_version = std::move(*proto.mutable_cuda_version());
  inventory.gpu_status = std::move(*proto.mutable_gpu_status());
  inventory.sampling = std::move(*proto.mutable_sampling());
  for (v1::GpuInventory& g : *proto.mutable_gpus()) {
    storage::GpuInventory gpu;
    gpu.index = g.index();
    gpu.uuid = std::move(*g.mutable_uuid());
    gpu.name = std::move(*g.mutable_name());
    gpu.memory_total_bytes = g.memory_total_bytes();
    gpu.mig_mode = std::move(*g.mutable_mig_mode());
    gpu.mig_devices.assign(g.mig_devices().begin(), g.mig_devices().end());
    inventory.gpus.push_back(std::move(gpu));
  }
  return inventory;
}

void InventoryToProto(const storage::StoredInventory& stored,
                      v1::AgentInventory* proto) {
  const storage::AgentInventory& inventory = stored.inventory;
  proto->set_host_name(inventory.host_name);
  proto->set_agent_version(inventory.agent_version);
  proto->set_cpu_model(inventory.cpu_model);
  proto->set_cpu_sockets(inventory.cpu_sockets);
  proto->set_cpu_count(inventory.cpu_count);
  proto->set_memory_total_bytes(inventory.memory_total_bytes);
  proto->set_driver_version(inventory.driver_version);
  proto->set_cuda_version(inventory.cuda_version);
  proto->set_gpu_status(inventory.gpu_status);
  proto->set_sampling(inventory.sampling);
  for (const storage::GpuInventory& gpu : inventory.gpus) {
    v1::GpuInventory* g = proto->add_gpus();
    g->set_index(gpu.index);
    g->set_uuid(gpu.uuid);
    g->set_name(gpu.name);
    g->set_memory_total_bytes(gpu.memory_total_bytes);
    g->set_mig_mode(gpu.mig_mode);
    for (const std::string& m : gpu.mig_devices) g->add_mig_devices(m);
  }
  MicrosToProto(stored.received_at_us, proto->mutable_received_at());
}

void TrialToProto(const storage::Trial& trial, v1::Trial* proto) {
  proto->set_id(trial.id);
  switch (trial.state) {
    case storage::TrialState::kActive:
      proto->set_state(v1::Trial::ACTIVE);
      break;
    case storage::TrialState::kCompleted:
      proto->set_state(v1::Trial::COMPLETED);
      break;
    case storage::TrialState::kCanceled:
      proto->set_state(v1::Trial::CANCELED);
      break;
    case storage::TrialState::kError:
      proto->set_state(v1::Trial::ERROR);
      break;
  }
  MicrosToProto(trial.created_at_us, proto->mutable_created_at());
  MicrosToProto(trial.updated_at_us, proto->mutable_updated_at());
  if (trial.run_id.has_value()) proto->set_run_id(*trial.run_id);
  if (trial.ended_at_us.has_value()) {
    MicrosToProto(*trial.ended_at_us, proto->mutable_ended_at());
  }
}

void SeriesToProto(const storage::SeriesInfo& series, v1::Series* proto) {
  proto->set_agent_id(series.agent_id);
  proto->set_gpu_uuid(series.gpu_uuid);
  proto->set_name(series.name);
  proto->set_unit(series.unit);
  proto->set_sample_count(series.sample_count);
  proto->set_gpu_index(series.gpu_index);
  if (series.first_time_us) {
    MicrosToProto(*series.first_time_us, proto->mutable_first_time());
  }
  if (series.last_time_us) {
    MicrosToProto(*series.last_time_us, proto->mutable_last_time());
  }
}

namespace {

// The selection and window, which the query requests and exports share.
template <typename Proto>
query::QueryRequest SelectionFromProto(const Proto& proto) {
  query::QueryRequest request;
  request.trial_id = proto.trial_id();
  request.names.assign(proto.name().begin(), proto.name().end());
  request.agent_ids.assign(proto.agent_id().begin(), proto.agent_id().end());
  request.gpu_uuids.assign(proto.gpu_uuid().begin(), proto.gpu_uuid().end());
  if (proto.has_start()) request.start = TimeFromProto(proto.start());
  if (proto.has_end()) request.end = TimeFromProto(proto.end());
  return request;
}

}  // namespace

query::QueryRequest QueryFromProto(const v1::QuerySeriesRequest& proto) {
  query::QueryRequest request = SelectionFromProto(proto);
  if (proto.has_max_points()) request.max_points = proto.max_points();
  if (proto.has_resolution_us()) request.resolution_us = proto.resolution_us();
  return request;
}

absl::Status CheckResolution(const v1::QuerySeriesRequest& request,
                             absl::Time now) {
  if (!request.has_resolution_us()) return absl::OkStatus();
  const int64_t resolution = request.resolution_us();
  if (resolution < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "resolution_us: ", resolution, " is negative"));
  }
  if (!request.has_start()) {
    return absl::InvalidArgumentError(
        "resolution_us: needs a start (the window's buckets are counted "
        "from it)");
  }
  if (resolution == 0) return absl::OkStatus();  // raw reads are bounded
  const int64_t start_us = request.start().seconds() * 1000000 +
                           request.start().nanos() / 1000;
  const int64_t end_us =
      request.has_end()
          ? request.end().seconds() * 1000000 + request.end().nanos() / 1000
          : absl::ToUnixMicros(now);
  constexpr int64_t kMaxBuckets = 10000;
  if (end_us > start_us && (end_us - start_us) / resolution >= kMaxBuckets) {
    return absl::InvalidArgumentError(absl::StrCat(
        "resolution_us: ", resolution, " gives more than ", kMaxBuckets,
        " buckets from start to ", request.has_end() ? "end" : "now"));
  }
  return absl::OkStatus();
}

query::QueryRequest QueryFromProto(const v1::ExportSamplesRequest& proto) {
  return SelectionFromProto(proto);
}

query::QueryRequest QueryFromProto(const v1::ExportTraceRequest& proto) {
  query::QueryRequest request = SelectionFromProto(proto);
  if (proto.has_max_points()) request.max_points = proto.max_points();
  return request;
}

absl::Status CheckView(v1::QuerySeriesRequest::View view) {
  if (v1::QuerySeriesRequest::View_IsValid(view)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "view: ", static_cast<int>(view), " is not FULL or CHART"));
}

namespace {

void SeriesDataToProto(const query::SeriesData& data,
                       v1::QuerySeriesRequest::View view, v1::SeriesBuckets* out) {
  SeriesToProto(data.series, out->mutable_series());
  out->set_resolution_us(data.resolution_us);
  out->mutable_bucket_start_us()->Assign(data.bucket_start_us.begin(),
                                         data.bucket_start_us.end());
  out->mutable_min()->Assign(data.min.begin(), data.min.end());
  out->mutable_max()->Assign(data.max.begin(), data.max.end());
  out->mutable_mean()->Assign(data.mean.begin(), data.mean.end());
  out->mutable_last_time_us()->Assign(data.last_time_us.begin(),
                                      data.last_time_us.end());
  if (view == v1::QuerySeriesRequest::CHART) return;
  out->mutable_count()->Assign(data.count.begin(), data.count.end());
  out->mutable_first_time_us()->Assign(data.first_time_us.begin(),
                                       data.first_time_us.end());
  out->mutable_first_value()->Assign(data.first_value.begin(),
                                     data.first_value.end());
  out->mutable_last_value()->Assign(data.last_value.begin(),
                                    data.last_value.end());
}

// An answer's view, window (none when empty) and raw_expired.
void AnswerHeadToProto(v1::QuerySeriesRequest::View view, int64_t start_us, int64_t end_us,
                       bool raw_expired, v1::QuerySeriesResponse* proto) {
  proto->set_view(view);
  proto->set_raw_expired(raw_expired);
  if (end_us > start_us) {
    MicrosToProto(start_us, proto->mutable_start());
    MicrosToProto(end_us, proto->mutable_end());
  }
}

}  // namespace

void QueryResultToProto(const query::QueryResult& result,
                        v1::QuerySeriesRequest::View view,
                        v1::QuerySeriesResponse* proto) {
  AnswerHeadToProto(view, result.start_us, result.end_us, result.raw_expired, proto);
  for (const query::SeriesData& data : result.series) {
    SeriesDataToProto(data, view, proto->add_series());
  }
}

query::SummaryRequest SummaryFromProto(const v1::SummarizeSeriesRequest& proto) {
  query::SummaryRequest request;
  request.trial_ids.assign(proto.trial_id().begin(), proto.trial_id().end());
  request.by_agent = proto.group() == v1::SummarizeSeriesRequest::AGENT;
  request.names.assign(proto.name().begin(), proto.name().end());
  request.agent_ids.assign(proto.agent_id().begin(), proto.agent_id().end());
  if (proto.has_gpu_index()) request.gpu_index = proto.gpu_index();
  if (proto.has_start()) request.start = TimeFromProto(proto.start());
  if (proto.has_end()) request.end = TimeFromProto(proto.end());
  request.relative = proto.relative();
  if (proto.has_offset_start_ms()) {
    request.offset_start = absl::Milliseconds(proto.offset_start_ms());
  }
  if (proto.has_offset_end_ms()) {
    request.offset_end = absl::Milliseconds(proto.offset_end_ms());
  }
  if (proto.has_max_points()) request.max_points = proto.max_points();
  return request;
}

absl::Status CheckGroup(v1::SummarizeSeriesRequest::Group group) {
  if (v1::SummarizeSeriesRequest::Group_IsValid(group)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("group: ", static_cast<int>(group), " is neither TRIAL nor AGENT"));
}

void SummaryToProto(const query::SummaryResult& result,
                    v1::QuerySeriesRequest::View view,
                    v1::QuerySeriesResponse* proto) {
  AnswerHeadToProto(view, result.start_us, result.end_us, result.raw_expired, proto);
  for (const query::SummarySeries& s : result.series) {
    v1::SeriesBuckets* out = proto->add_series();
    SeriesDataToProto(s.data, view, out);
    out->mutable_series()->set_trial_id(s.trial_id);
    out->mutable_series()->set_gpu_count(s.gpu_count);
    out->mutable_series()->set_agent_count(s.agent_count);
    out->set_origin_us(s.origin_us);
  }
}

std::optional<storage::TrialState> TrialStateFromProto(v1::Trial::State state) {
  switch (state) {
    case v1::Trial::ACTIVE:
      return storage::TrialState::kActive;
    case v1::Trial::COMPLETED:
      return storage::TrialState::kCompleted;
    case v1::Trial::CANCELED:
      return storage::TrialState::kCanceled;
    case v1::Trial::ERROR:
      return storage::TrialState::kError;
    default:
      return std::nullopt;
  }
}

}  // namespace metrics::server

#include "server/proto_convert.h"

namespace metrics::server {

namespace {

absl::Time TimeFromProto(const google::protobuf::Timestamp& t) {
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}

void TimeToProto(absl::Time t, google::protobuf::Timestamp* proto) {
  const int64_t micros = absl::ToUnixMicros(t);
  int64_t seconds = micros / 1000000;
  int64_t rest = micros % 1000000;
  if (rest < 0) {
    --seconds;
    rest += 1000000;
  }
  proto->set_seconds(seconds);
  proto->set_nanos(static_cast<int32_t>(rest * 1000));
}

}  // namespace

storage::SystemBatch BatchFromProto(const v1::SystemMetricsBatch& proto) {
  storage::SystemBatch batch;
  batch.sequence = proto.sequence();
  batch.trial_id = proto.trial_id();
  batch.agent_id = proto.agent_id();
  batch.series.reserve(proto.series_size());
  for (const v1::SeriesDeclaration& s : proto.series()) {
    batch.series.push_back({s.name(), s.gpu_uuid(), s.unit()});
  }
  batch.reports.reserve(proto.reports_size());
  for (const v1::SystemMetricsReport& r : proto.reports()) {
    storage::Report report;
    report.time = TimeFromProto(r.time());
    report.series.assign(r.series().begin(), r.series().end());
    report.values.assign(r.values().begin(), r.values().end());
    batch.reports.push_back(std::move(report));
  }
  return batch;
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
  TimeToProto(trial.created_at, proto->mutable_created_at());
  TimeToProto(trial.updated_at, proto->mutable_updated_at());
  if (trial.ended_at.has_value()) {
    TimeToProto(*trial.ended_at, proto->mutable_ended_at());
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

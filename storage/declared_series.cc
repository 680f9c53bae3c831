#include "storage/declared_series.h"

#include <algorithm>
#include <utility>

#include "storage/format/value_codec.h"

namespace metrics::storage {

namespace {

void AppendLabel(std::string& out, absl::string_view label,
                 absl::string_view previous) {
  char length[kMaxVarintBytes];
  if (label == previous) {
    out.append(length, WriteVarint(length, 0));
    return;
  }
  out.append(length, WriteVarint(length, label.size() + 1));
  out.append(label.data(), label.size());
}

// Only reads what AppendLabel wrote, so it cannot fail.
absl::string_view TakeLabel(absl::string_view& in, absl::string_view previous) {
  uint64_t length = 0;
  ReadVarint(in, length);
  if (length == 0) return previous;
  const absl::string_view label = in.substr(0, length - 1);
  in.remove_prefix(length - 1);
  return label;
}

}  // namespace

DeclaredSeries::Reader::Reader(const DeclaredSeries& declared)
    : in_(declared.packed_) {
  uint64_t count = 0;
  ReadVarint(in_, count);
}

DeclaredSeries::Labels DeclaredSeries::Reader::Next() {
  previous_.name = TakeLabel(in_, previous_.name);
  previous_.gpu_uuid = TakeLabel(in_, previous_.gpu_uuid);
  previous_.unit = TakeLabel(in_, previous_.unit);
  return previous_;
}

DeclaredSeries::DeclaredSeries(Private, int32_t trial_id,
                               absl::string_view metric_group,
                               absl::string_view agent_id, Keeper keeper)
    : trial_id_(trial_id),
      metric_group_(metric_group),
      agent_id_(agent_id),
      keeper_(keeper) {}

DeclaredSeries::~DeclaredSeries() { delete[] scattered_.load(); }

std::shared_ptr<const DeclaredSeries> DeclaredSeries::Create(
    int32_t trial_id, absl::string_view metric_group,
    absl::string_view agent_id, const std::vector<SeriesDeclaration>& series,
    Keeper keeper) {
  return Create(
      trial_id, metric_group, agent_id, series.size(),
      [&series](size_t i) {
        return Labels{series[i].name, series[i].gpu_uuid, series[i].unit};
      },
      keeper);
}

std::shared_ptr<const DeclaredSeries> DeclaredSeries::Create(
    int32_t trial_id, absl::string_view metric_group,
    absl::string_view agent_id, size_t count,
    absl::FunctionRef<Labels(size_t)> labels_at, Keeper keeper) {
  auto declared = std::make_shared<DeclaredSeries>(
      Private(), trial_id, metric_group, agent_id, keeper);
  std::string& packed = declared->packed_;
  size_t bytes = kMaxVarintBytes;
  for (size_t i = 0; i < count; ++i) {
    const Labels labels = labels_at(i);
    bytes += 3 + labels.name.size() + labels.gpu_uuid.size() +
             labels.unit.size();
  }
  packed.reserve(bytes);
  char length[kMaxVarintBytes];
  packed.append(length, WriteVarint(length, count));
  Labels previous;
  for (size_t i = 0; i < count; ++i) {
    const Labels labels = labels_at(i);
    AppendLabel(packed, labels.name, previous.name);
    AppendLabel(packed, labels.gpu_uuid, previous.gpu_uuid);
    AppendLabel(packed, labels.unit, previous.unit);
    previous = labels;
  }
  packed.shrink_to_fit();  // the reserve counted repeats in full
  declared->size_ = count;
  return declared;
}

bool DeclaredSeries::Repeats(int32_t trial_id, absl::string_view metric_group,
                             absl::string_view agent_id, size_t count,
                             absl::FunctionRef<Labels(size_t)> labels_at) const {
  if (count != size_ || !Of(trial_id, metric_group, agent_id)) return false;
  Reader reader(*this);
  for (size_t i = 0; i < count; ++i) {
    const Labels mine = reader.Next();
    const Labels theirs = labels_at(i);
    if (mine.name != theirs.name || mine.gpu_uuid != theirs.gpu_uuid ||
        mine.unit != theirs.unit) {
      return false;
    }
  }
  return true;
}

std::vector<SeriesDeclaration> DeclaredSeries::Unpack() const {
  std::vector<SeriesDeclaration> series;
  series.reserve(size_);
  Reader reader(*this);
  for (size_t i = 0; i < size_; ++i) {
    const Labels labels = reader.Next();
    series.push_back({std::string(labels.name), std::string(labels.gpu_uuid),
                      std::string(labels.unit)});
  }
  return series;
}

void DeclaredSeries::PublishIds(const std::vector<int64_t>& ids) const {
  if (ids.empty() || ids.size() != size_ || ids_known()) return;
  bool consecutive = true;
  for (size_t i = 1; i < ids.size() && consecutive; ++i) {
    consecutive = ids[i] == ids[0] + static_cast<int64_t>(i);
  }
  if (!consecutive) {
    auto* scattered = new int64_t[ids.size()];
    std::copy(ids.begin(), ids.end(), scattered);
    const int64_t* none = nullptr;
    if (!scattered_.compare_exchange_strong(none, scattered,
                                            std::memory_order_acq_rel)) {
      delete[] scattered;  // another commit published them first: the same
    }
  }
  int64_t unknown = 0;
  first_id_.compare_exchange_strong(unknown, ids[0], std::memory_order_acq_rel);
}

}  // namespace metrics::storage

// The series declarations of one agent's batches, kept once and shared by
// the batches that repeat them, with what ingest learns of them once: that
// their labels are valid, and their registry ids.
//
// An agent declares all its series in every batch (25 for a host of 8
// GPUs), and they seldom change. An ingest stream keeps its last
// declarations here (server/services/ingest_stream_reactor.h); a batch that
// repeats them shares them instead of carrying its own, so its labels are
// neither copied, nor checked again (ValidateBatch), nor looked up in the
// registry once a commit has found their ids (GroupTransaction): a known
// stream's batch costs the writer none of that (docs/benchmarks.md, "What a
// report costs at least"). The labels are kept packed (about 0.5 KB for 25
// series, against 2.4 KB of strings), which is also how a batch that waits
// behind many others keeps its own (PendingBatch::PackSeries).
//
// Ids stay true once found: the registry is insert-only, and they are
// published only after the transaction that found or registered them
// committed, for exactly these labels under this trial, group and agent.
//
// Thread-safety: thread-safe. The labels never change after Create; the
// label check and the ids are set once, by any thread, and read by any.
#ifndef METRICS_STORAGE_DECLARED_SERIES_H_
#define METRICS_STORAGE_DECLARED_SERIES_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"
#include "storage/metric_store.h"

namespace metrics::storage {

class DeclaredSeries {
 public:
  // One declaration, viewing the packed labels (valid while the
  // DeclaredSeries lives).
  struct Labels {
    absl::string_view name, gpu_uuid, unit;
  };

  // Reads the declarations in order.
  class Reader {
   public:
    explicit Reader(const DeclaredSeries& declared);
    // The next declaration; REQUIRES: fewer than size() read so far.
    Labels Next();

   private:
    absl::string_view in_;
    Labels previous_;
  };

  // Whose the declarations are: one batch's, or a stream's, which keeps
  // them for its later batches (and then their ids need no other cache).
  enum class Keeper { kBatch, kStream };

  // `series` of a batch of `trial_id`, `metric_group` and `agent_id`.
  static std::shared_ptr<const DeclaredSeries> Create(
      int32_t trial_id, absl::string_view metric_group,
      absl::string_view agent_id, const std::vector<SeriesDeclaration>& series,
      Keeper keeper = Keeper::kBatch);
  // The same from any sequence of `count` declarations, the i-th given by
  // `labels_at(i)` (a proto's, without copying its strings first).
  static std::shared_ptr<const DeclaredSeries> Create(
      int32_t trial_id, absl::string_view metric_group,
      absl::string_view agent_id, size_t count,
      absl::FunctionRef<Labels(size_t)> labels_at,
      Keeper keeper = Keeper::kBatch);

  ~DeclaredSeries();

  // Whether a batch of these labels that declares `count` series, the i-th
  // given by `labels_at(i)`, declares exactly these, in this order.
  bool Repeats(int32_t trial_id, absl::string_view metric_group,
               absl::string_view agent_id, size_t count,
               absl::FunctionRef<Labels(size_t)> labels_at) const;

  // Whether these are the declarations of a batch of these labels.
  bool Of(int32_t trial_id, absl::string_view metric_group,
          absl::string_view agent_id) const {
    return trial_id == trial_id_ && agent_id == agent_id_ &&
           metric_group == metric_group_;
  }

  size_t size() const { return size_; }
  bool kept_by_stream() const { return keeper_ == Keeper::kStream; }
  std::vector<SeriesDeclaration> Unpack() const;
  // The packed labels' bytes.
  size_t packed_bytes() const { return packed_.capacity(); }

  // Whether ValidateBatch found the labels valid already.
  bool labels_valid() const {
    return labels_valid_.load(std::memory_order_acquire);
  }
  void MarkLabelsValid() const {
    labels_valid_.store(true, std::memory_order_release);
  }

  // Whether the registry ids of the declarations are published.
  bool ids_known() const {
    return first_id_.load(std::memory_order_acquire) != 0;
  }
  // The registry id of declaration `i`; REQUIRES: ids_known().
  int64_t id(size_t i) const {
    const int64_t* scattered = scattered_.load(std::memory_order_acquire);
    return scattered != nullptr
               ? scattered[i]
               : first_id_.load(std::memory_order_relaxed) +
                     static_cast<int64_t>(i);
  }
  // Publishes `ids`, parallel to the declarations (REQUIRES: their registry
  // ids, committed); the first publication stays. Ids registered together
  // are consecutive, and then only the first is kept.
  void PublishIds(const std::vector<int64_t>& ids) const;

  // Public for make_shared only: use Create.
  struct Private {};
  DeclaredSeries(Private, int32_t trial_id, absl::string_view metric_group,
                 absl::string_view agent_id, Keeper keeper);
  DeclaredSeries(const DeclaredSeries&) = delete;
  DeclaredSeries& operator=(const DeclaredSeries&) = delete;

 private:
  const int32_t trial_id_;
  const std::string metric_group_;
  const std::string agent_id_;
  const Keeper keeper_;
  size_t size_ = 0;
  // The count, then each series' name, GPU UUID and unit; a label equal to
  // the previous series' one (an agent's GPU series come in runs of one
  // UUID, and units repeat) is a 0, another a varint of its length + 1 and
  // its bytes.
  std::string packed_;
  mutable std::atomic<bool> labels_valid_{false};
  // The first id (0 until published: registry ids start at 1), and all of
  // them when they are not consecutive (owned; set before first_id_).
  mutable std::atomic<int64_t> first_id_{0};
  mutable std::atomic<const int64_t*> scattered_{nullptr};
};

}  // namespace metrics::storage

#endif  // METRICS_STORAGE_DECLARED_SERIES_H_

// The reactor of one StreamSystemMetrics call. It reads the opening
// message, looks up the stream's trial and position (on the executor of
// stream opens, where it may wait its turn up to `open_timeout`) and
// answers it, then reads batches one at a time: each batch in sequence is
// handed to the store's writer; a batch already seen is skipped; a gap ends
// the stream. At most `max_inflight` batches wait for their commit; beyond
// that the reactor stops reading, so gRPC flow control slows the client.
// A batch that declares the same series as the one before it shares its
// declarations (storage::DeclaredSeries). As commits complete it writes
// acknowledgements (coalesced: one write
// carries the highest sequence done and any rejections since the last).
//
// Once open, its token is watched (CallGuard::WatchStream): when it stops
// authenticating (revoked, expired) the stream ends UNAUTHENTICATED, after
// acknowledging what is stored.
//
// Lifetime: created by IngestService for each call; deletes itself once
// gRPC has called OnDone and no store or watch callback is outstanding.
//
// Thread-safety: reactions, executor and writer callbacks run on different
// threads; all state is under mu_, and gRPC operations are started after
// mu_ is released.
#ifndef METRICS_SERVER_SERVICES_INGEST_STREAM_REACTOR_H_
#define METRICS_SERVER_SERVICES_INGEST_STREAM_REACTOR_H_

#include <grpcpp/support/server_callback.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "google/protobuf/arena.h"
#include "proto/metrics/v1/ingest.pb.h"
#include "common/blocking_executor.h"
#include "server/auth/call_guard.h"
#include "server/services/ingest_stream_options.h"
#include "server/services/service_statistics.h"
#include "storage/metric_store.h"

namespace metrics::server {

class IngestStreamReactor
    : public grpc::ServerBidiReactor<v1::StreamSystemMetricsRequest,
                                     v1::StreamSystemMetricsResponse> {
 public:
  // `open` counts the stream in /metrics while the reactor lives.
  IngestStreamReactor(grpc::CallbackServerContext* context,
                      storage::MetricStore* store,
                      common::BlockingExecutor* open_executor,
                      const IngestStreamOptions& options,
                      ServiceStatistics::OpenStream open, const CallGuard* guard);

  void OnReadDone(bool ok) override ABSL_LOCKS_EXCLUDED(mu_);
  void OnWriteDone(bool ok) override ABSL_LOCKS_EXCLUDED(mu_);
  void OnCancel() override ABSL_LOCKS_EXCLUDED(mu_);
  void OnDone() override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // gRPC operations decided under mu_, started after it is released.
  struct Actions {
    // The message to read into, taken under mu_: HandleBatch replaces
    // request_ under mu_ once that read is done, on another thread.
    v1::StreamSystemMetricsRequest* read = nullptr;
    bool write = false;
    std::optional<grpc::Status> finish;
  };

  void HandleOpen(Actions& actions) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandleBatch(Actions& actions) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnOpened(absl::StatusOr<int64_t> position,
                std::unique_ptr<CredentialWatch::Watched> watched)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The credential watch's word that the token no longer authenticates.
  void OnRefused(const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);
  void OnCommitted(storage::BatchOutcome outcome) ABSL_LOCKS_EXCLUDED(mu_);

  void FinishLocked(const absl::Status& status, Actions& actions)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Tells the client when to retry a RESOURCE_EXHAUSTED finish.
  // The wait `refusal` asks for, else options_.retry_after.
  void AddRetryAfterLocked(const absl::Status& refusal) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether the call has ended or is ending: an open still queued for it
  // need not read the database.
  bool Gone() ABSL_LOCKS_EXCLUDED(mu_);
  // Fills response_ with what is new to acknowledge, if anything and no
  // write is in progress.
  void PrepareAckLocked(Actions& actions) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Decides the next read, write or finish after any change.
  void ProgressLocked(Actions& actions) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts the decided gRPC operations. Within a reaction the call cannot
  // complete underneath; from a store callback, the callback's reference
  // keeps the reactor alive until Release.
  void Run(Actions actions);
  // Run, from a store callback (REQUIRES: it counted itself in starting_).
  // gRPC holds no reference to the call there: a Finish from a reaction
  // meanwhile could end the call (OnDone) before this callback's StartRead
  // or StartWrite, which would then touch a freed stream. So a Finish waits
  // while any such callback is starting operations, and the last to finish
  // starting issues it.
  void RunFromStore(Actions actions) ABSL_LOCKS_EXCLUDED(mu_);
  // Drops a store callback's reference; deletes the reactor if it was the
  // last one after OnDone.
  void Release() ABSL_LOCKS_EXCLUDED(mu_);

  grpc::CallbackServerContext* const context_;
  storage::MetricStore* const store_;
  common::BlockingExecutor* const executor_;
  const CallGuard* const guard_;  // null: authentication off
  const IngestStreamOptions options_;
  const ServiceStatistics::OpenStream open_;

  absl::Mutex mu_;
  // Each message is parsed into the arena (a few blocks instead of an
  // allocation per report and field) and dropped whole once converted;
  // owned by gRPC between StartRead and OnReadDone.
  google::protobuf::Arena arena_;
  v1::StreamSystemMetricsRequest* request_ ABSL_GUARDED_BY(mu_);
  // Owned by gRPC between StartWrite and OnWriteDone.
  v1::StreamSystemMetricsResponse response_;

  bool opened_ ABSL_GUARDED_BY(mu_) = false;
  bool opening_ ABSL_GUARDED_BY(mu_) = false;
  bool reading_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;  // the client half-closed
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  // A Finish waiting for the write in progress, or for store callbacks
  // still starting operations (starting_).
  std::optional<grpc::Status> deferred_finish_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;  // gRPC called OnDone
  // Store callbacks outstanding (each holds a reference): the reactor is
  // deleted only when this is 0 after OnDone.
  int refs_ ABSL_GUARDED_BY(mu_) = 0;
  bool leaving_ ABSL_GUARDED_BY(mu_) = false;  // OnDone began
  // From the open until OnDone, which lets go of it outside mu_.
  std::unique_ptr<CredentialWatch::Watched> watched_ ABSL_GUARDED_BY(mu_);
  int inflight_ ABSL_GUARDED_BY(mu_) = 0;   // batches awaiting commit
  // Store callbacks between deciding gRPC operations and starting them.
  int starting_ ABSL_GUARDED_BY(mu_) = 0;

  std::string stream_id_ ABSL_GUARDED_BY(mu_);
  int32_t trial_id_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t next_sequence_ ABSL_GUARDED_BY(mu_) = 1;
  int64_t acked_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t written_ack_ ABSL_GUARDED_BY(mu_) = -1;  // -1: nothing sent yet
  // The last batch's series declarations, shared by the batches that repeat
  // them (storage::DeclaredSeries): about 0.5 KB for 25 series, once their
  // ids are known 0.2 KB more.
  std::shared_ptr<const storage::DeclaredSeries> declared_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::BatchRejection> rejections_ ABSL_GUARDED_BY(mu_);
};

}  // namespace metrics::server

#endif  // METRICS_SERVER_SERVICES_INGEST_STREAM_REACTOR_H_

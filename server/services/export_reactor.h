// The reactor of one export call (ExportSamples, ExportTrace). The export
// (a query-layer writer fed by a store read) runs on a thread of the pool
// it is given, not the one answering charts: an export of a long run takes
// minutes. Its chunks go out one write at a time, the thread waiting for
// each to complete, so a slow reader slows the export and the call holds
// one chunk at most besides the writer's. The first message carries the
// file's content type and name. A caller that leaves makes the export's
// next chunk fail with CANCELLED, which ends it.
//
// Lifetime: deletes itself once both OnDone has run and its thread has
// finished the call (or the pool refused it).
//
// Thread-safety: the export thread and gRPC's reactions share state under
// mu_; gRPC operations start after mu_ is released.
#ifndef METRICS_SERVER_SERVICES_EXPORT_REACTOR_H_
#define METRICS_SERVER_SERVICES_EXPORT_REACTOR_H_

#include <grpcpp/support/server_callback.h>

#include <functional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/blocking_executor.h"
#include "proto/metrics/v1/query.pb.h"
#include "query/export.h"

namespace metrics::server {

class ExportReactor : public grpc::ServerWriteReactor<v1::ExportChunk> {
 public:
  // Runs `produce` on `pool` with an emit that writes its chunks.
  // `produced` runs once `produce` has returned (or the pool refused it),
  // before the call finishes: what `produce` uses need live only until
  // then. A pool that refuses the work finishes the call RESOURCE_EXHAUSTED.
  using Produce = std::function<absl::Status(const query::ExportEmit& emit)>;
  static ExportReactor* Start(common::BlockingExecutor& pool, std::string content_type,
                              std::string file_name, Produce produce,
                              std::function<void()> produced);

  void OnWriteDone(bool ok) override ABSL_LOCKS_EXCLUDED(mu_);
  void OnCancel() override ABSL_LOCKS_EXCLUDED(mu_);
  void OnDone() override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  ExportReactor(std::string content_type, std::string file_name);
  void Run(const Produce& produce, const std::function<void()>& produced)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Write(std::string chunk) ABSL_LOCKS_EXCLUDED(mu_);
  bool Idle() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !writing_; }
  bool CanWrite() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !writing_ || gone_; }

  const std::string content_type_;
  const std::string file_name_;
  v1::ExportChunk message_;  // the write in flight's
  absl::Mutex mu_;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool gone_ ABSL_GUARDED_BY(mu_) = false;  // cancelled, or a write failed
  bool sent_first_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;          // OnDone ran
  bool thread_done_ ABSL_GUARDED_BY(mu_) = false;   // the thread finished
};

}  // namespace metrics::server

#endif  // METRICS_SERVER_SERVICES_EXPORT_REACTOR_H_

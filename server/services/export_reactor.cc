#include "server/services/export_reactor.h"

#include <utility>

#include "common/grpc_status.h"

namespace metrics::server {

ExportReactor* ExportReactor::Start(common::BlockingExecutor& pool, std::string content_type,
                                    std::string file_name, Produce produce,
                                    std::function<void()> produced) {
  auto* reactor = new ExportReactor(std::move(content_type), std::move(file_name));
  auto refused = [](const query::ExportEmit&) {
    return absl::ResourceExhaustedError("the server is busy; export again later");
  };
  // A refused export is answered here: Run makes no read and no wait then.
  auto run = [reactor, produce, produced] { reactor->Run(produce, produced); };
  if (!pool.Post(std::move(run))) reactor->Run(refused, produced);
  return reactor;
}

ExportReactor::ExportReactor(std::string content_type, std::string file_name)
    : content_type_(std::move(content_type)), file_name_(std::move(file_name)) {}

void ExportReactor::Run(const Produce& produce, const std::function<void()>& produced) {
  const absl::Status status =
      produce([this](std::string chunk) { return Write(std::move(chunk)); });
  produced();
  bool empty_export = false;
  {
    absl::MutexLock lock(&mu_);
    // Finish must not overlap a write (a caller that left completes it too).
    mu_.Await(absl::Condition(this, &ExportReactor::Idle));
    if (status.ok() && !sent_first_ && !gone_) {
      // An export of nothing still names its type.
      sent_first_ = empty_export = true;
      message_.Clear();
      message_.set_content_type(content_type_);
      message_.set_file_name(file_name_);
    }
  }
  if (empty_export) {
    StartWriteAndFinish(&message_, grpc::WriteOptions(), common::ToGrpcStatus(status));
  } else {
    Finish(common::ToGrpcStatus(status));
  }
  bool delete_now;
  {
    absl::MutexLock lock(&mu_);
    thread_done_ = true;
    delete_now = done_;
  }
  if (delete_now) delete this;
}

absl::Status ExportReactor::Write(std::string chunk) {
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &ExportReactor::CanWrite));
    if (gone_) return absl::CancelledError("the caller left the export");
    message_.Clear();
    if (!sent_first_) {
      sent_first_ = true;
      message_.set_content_type(content_type_);
      message_.set_file_name(file_name_);
    }
    message_.set_data(std::move(chunk));
    writing_ = true;
  }
  StartWrite(&message_);
  return absl::OkStatus();
}

void ExportReactor::OnWriteDone(bool ok) {
  absl::MutexLock lock(&mu_);
  writing_ = false;
  if (!ok) gone_ = true;
}

void ExportReactor::OnCancel() {
  absl::MutexLock lock(&mu_);
  gone_ = true;
}

void ExportReactor::OnDone() {
  bool delete_now;
  {
    absl::MutexLock lock(&mu_);
    done_ = true;
    delete_now = thread_done_;
  }
  if (delete_now) delete this;
}

}  // namespace metrics::server

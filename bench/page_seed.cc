// Seeds one trial for the page benchmark (bench/page.sh): registers it and
// loads, through the gRPC ingest API, `--seconds` of 1 Hz reports of each of
// `--agents` agents with 8 GPUs (25 series, tests/testing/realistic_batch.h)
// ending at `--end_unix`, on two streams at a time so both writer lanes work.
#include <grpcpp/create_channel.h>

#include <cstdio>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "proto/metrics/v1/trials.grpc.pb.h"
#include "tests/testing/realistic_batch.h"
#include "tests/testing/resending_streamer.h"

ABSL_FLAG(std::string, target, "127.0.0.1:8081", "metricsd's gRPC address.");
ABSL_FLAG(int32_t, trial, 1, "The trial to register and fill.");
ABSL_FLAG(int64_t, seconds, 300, "Seconds of 1 Hz reports.");
ABSL_FLAG(int64_t, end_unix, 0, "When the last report is (0: now).");
ABSL_FLAG(int32_t, agents, 1,
          "Agents (agent-0, agent-1, ...), each with every report.");

namespace metrics::bench {
namespace {

constexpr int64_t kReportsPerBatch = 10000;
constexpr int kStreams = 2;

int Main() {
  const std::string target = absl::GetFlag(FLAGS_target);
  const int32_t trial = absl::GetFlag(FLAGS_trial);
  const int64_t seconds = absl::GetFlag(FLAGS_seconds);
  const int64_t end_unix = absl::GetFlag(FLAGS_end_unix) > 0
                               ? absl::GetFlag(FLAGS_end_unix)
                               : absl::ToUnixSeconds(absl::Now());
  const absl::Time start = absl::FromUnixSeconds(end_unix - seconds + 1);
  {
    auto trials = v1::TrialService::NewStub(
        grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    v1::CreateTrialRequest request;
    request.set_id(trial);
    v1::Trial created;
    const grpc::Status status =
        trials->CreateTrial(&context, request, &created);
    if (!status.ok()) {
      std::fprintf(stderr, "page_seed: creating trial %d: %s\n", trial,
                   status.error_message().c_str());
      return 1;
    }
  }
  for (int agent = 0; agent < absl::GetFlag(FLAGS_agents); ++agent) {
    std::vector<std::thread> threads;
    std::vector<absl::Status> results(kStreams);
    const int64_t per_stream = (seconds + kStreams - 1) / kStreams;
    for (int s = 0; s < kStreams; ++s) {
      threads.emplace_back([&, s] {
        std::vector<v1::SystemMetricsBatch> batches;
        const int64_t last = std::min(seconds, (s + 1) * per_stream);
        for (int64_t r = s * per_stream; r < last; r += kReportsPerBatch) {
          v1::SystemMetricsBatch batch;
          batch.set_trial_id(trial);
          batch.set_agent_id(absl::StrCat("agent-", agent));
          test_util::DeclareRealisticSeries(batch);
          for (int64_t i = r; i < std::min(last, r + kReportsPerBatch); ++i) {
            test_util::AddRealisticReport(batch, start + absl::Seconds(i), i);
          }
          batches.push_back(std::move(batch));
        }
        test_util::StreamerOptions options;
        options.stream_id =
            absl::StrCat("page-seed/", trial, "/", agent, "/", s);
        options.trial_id = trial;
        options.window = 4;
        options.timeout = absl::Minutes(30);
        test_util::ResendingStreamer streamer([&] { return target; }, options);
        results[s] = streamer.SendAll(std::move(batches));
      });
    }
    for (std::thread& t : threads) t.join();
    for (const absl::Status& r : results) {
      if (!r.ok()) {
        std::fprintf(stderr, "page_seed: loading trial %d: %s\n", trial,
                     r.ToString().c_str());
        return 1;
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace metrics::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return metrics::bench::Main();
}

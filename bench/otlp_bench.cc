// The OTLP ingest benchmark (docs/benchmarks.md): the same values loaded
// into metricsd four ways, each into a metricsd of its own on a fresh
// database, in one run:
//   stream         the service's own gRPC stream (StreamSystemMetrics), as
//                  the agent and the client libraries send;
//   otlp_grpc      OTLP/gRPC MetricsService/Export;
//   otlp_http_pb   OTLP/HTTP POST /v1/metrics, application/x-protobuf;
//   otlp_http_json OTLP/HTTP POST /v1/metrics, OTLP's JSON.
// The values are the ingest benchmark's realistic reports (25 series: 9
// host, 2 per GPU x 8 GPUs), 200 reports a batch or request, from a few
// senders at once (one agent each). An OTLP request carries a batch as
// one gauge per series with a point per report, the GPU as a "gpu.uuid"
// point attribute, so every way stores the same series and values (checked
// by counting the stored values). Requests and HTTP bodies are built before
// the clock; sending them (gRPC's serialisation included) is in it.
// Throughput is values from first send to last answer; CPU is read from
// /proc for PostgreSQL, metricsd and this process (the client). The loads
// run in rounds, the order reversed each round; each way's best round
// counts. Prints a table, then one JSON object as the last line.
#include <grpcpp/create_channel.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/marshalling.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "bench/bench_loads.h"
#include "bench/cpu_time.h"
#include "common/status_macros.h"
#include "common/subprocess.h"
#include "google/protobuf/util/json_util.h"
#include "proto/metrics/v1/ingest.grpc.pb.h"
#include "proto/metrics/v1/trials.grpc.pb.h"
#include "proto/opentelemetry/proto/collector/metrics/v1/metrics_service.grpc.pb.h"
#include "storage/pg/testing/pg_checks.h"
#include "tests/testing/http_client.h"
#include "tests/testing/realistic_batch.h"
#include "tests/testing/resending_streamer.h"
#include "tests/testing/test_database.h"

ABSL_FLAG(int, senders, 4, "Senders (agents) at once, each one request or batch window.");
ABSL_FLAG(int, reports, 100000, "Reports (25 values each) per load, in all.");
ABSL_FLAG(int, batch_reports, 200, "Reports per batch or OTLP request.");
ABSL_FLAG(int, otlp_in_flight, 4,
          "OTLP requests in flight per sender (a Collector's otlp exporter sends from 10 "
          "consumers by default); the stream keeps a window of 16 batches.");
ABSL_FLAG(std::vector<std::string>, ways,
          std::vector<std::string>({"stream", "otlp_grpc", "otlp_http_pb", "otlp_http_json"}),
          "The ways to load, of stream, otlp_grpc, otlp_http_pb, otlp_http_json; the "
          "ratios need stream.");
ABSL_FLAG(int, rounds, 2, "Rounds of the four loads; each way's best counts.");

namespace metrics::bench {
namespace {

namespace otlp = ::opentelemetry::proto;
using common::Subprocess;
using test_util::TestDatabase;

constexpr int kTrial = 1;

// One sender's load, in each way's form.
struct Work {
  std::vector<v1::SystemMetricsBatch> batches;
  std::vector<otlp::collector::metrics::v1::ExportMetricsServiceRequest> requests;
  std::vector<std::string> protobuf_bodies, json_bodies;
};

// A batch as an OTLP export request: the trial and agent as resource
// attributes, one gauge per series (named and with the unit as declared),
// a point per report.
otlp::collector::metrics::v1::ExportMetricsServiceRequest ToOtlp(
    const v1::SystemMetricsBatch& batch) {
  otlp::collector::metrics::v1::ExportMetricsServiceRequest request;
  otlp::metrics::v1::ResourceMetrics* rm = request.add_resource_metrics();
  auto attribute = [](auto* attributes, const char* key, const std::string& value) {
    otlp::common::v1::KeyValue* kv = attributes->Add();
    kv->set_key(key);
    kv->mutable_value()->set_string_value(value);
  };
  attribute(rm->mutable_resource()->mutable_attributes(), "trial.id",
            absl::StrCat(batch.trial_id()));
  attribute(rm->mutable_resource()->mutable_attributes(), "host.name", batch.agent_id());
  otlp::metrics::v1::ScopeMetrics* sm = rm->add_scope_metrics();
  for (int s = 0; s < batch.series_size(); ++s) {
    otlp::metrics::v1::Metric* m = sm->add_metrics();
    m->set_name(batch.series(s).name());
    m->set_unit(batch.series(s).unit());
    for (const v1::SystemMetricsReport& report : batch.reports()) {
      otlp::metrics::v1::NumberDataPoint* p = m->mutable_gauge()->add_data_points();
      p->set_time_unix_nano(static_cast<uint64_t>(report.time().seconds()) * 1000000000 +
                            static_cast<uint64_t>(report.time().nanos()));
      p->set_as_double(report.values(s));
      if (!batch.series(s).gpu_uuid().empty()) {
        attribute(p->mutable_attributes(), "gpu.uuid", batch.series(s).gpu_uuid());
      }
    }
  }
  return request;
}

std::vector<Work> BuildWork(int senders, int reports_per_sender, int per_batch) {
  std::vector<Work> work(senders);
  const absl::Time history = absl::Now() - absl::Hours(24 * 30);
  google::protobuf::util::JsonPrintOptions json;
  json.always_print_enums_as_ints = true;  // OTLP's JSON
  for (int s = 0; s < senders; ++s) {
    for (int first = 0; first < reports_per_sender; first += per_batch) {
      v1::SystemMetricsBatch batch;
      batch.set_trial_id(kTrial);
      batch.set_agent_id(absl::StrCat("sender-", s));
      test_util::DeclareRealisticSeries(batch);
      for (int r = first; r < std::min(reports_per_sender, first + per_batch); ++r) {
        test_util::AddRealisticReport(batch, history + absl::Seconds(r), r);
      }
      work[s].requests.push_back(ToOtlp(batch));
      work[s].protobuf_bodies.push_back(work[s].requests.back().SerializeAsString());
      std::string body;
      (void)google::protobuf::util::MessageToJsonString(work[s].requests.back(), &body, json);
      work[s].json_bodies.push_back(std::move(body));
      work[s].batches.push_back(std::move(batch));
    }
  }
  return work;
}

using Load = WayLoad;

// Sends `work` the way `way` says to a metricsd of its own on a fresh
// database; the time is from the first send to the last answer.
absl::StatusOr<Load> RunLoad(absl::string_view way, std::vector<Work>& work,
                             pid_t postmaster) {
  ASSIGN_OR_RETURN(std::unique_ptr<TestDatabase> db, TestDatabase::Create());
  ASSIGN_OR_RETURN(BenchMetricsd server, StartBenchMetricsd(METRICSD_PATH, db->url()));
  std::unique_ptr<Subprocess>& metricsd = server.process;
  const std::string& target = server.grpc_target;
  const int http_port = server.http_port;
  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  {
    grpc::ClientContext context;
    v1::CreateTrialRequest request;
    request.set_id(kTrial);
    v1::Trial trial;
    grpc::Status created =
        v1::TrialService::NewStub(channel)->CreateTrial(&context, request, &trial);
    if (!created.ok()) return absl::InternalError(created.error_message());
  }
  auto otlp_stub = otlp::collector::metrics::v1::MetricsService::NewStub(channel);

  absl::Mutex mu;
  std::string failure;
  auto fail = [&](std::string why) {
    absl::MutexLock lock(&mu);
    if (failure.empty()) failure = std::move(why);
  };
  // Sender s's batches (the stream), or its requests lane, lane + lanes, ...
  auto send = [&](Work& w, size_t s, int lane, int lanes) {
    if (way == "stream") {
      test_util::StreamerOptions options;
      options.stream_id = absl::StrCat("sender-", s);
      options.trial_id = kTrial;
      options.window = 16;
      options.timeout = absl::Minutes(10);
      test_util::ResendingStreamer streamer([&] { return target; }, options);
      if (absl::Status sent = streamer.Send(w.batches); !sent.ok()) fail(sent.ToString());
      return;
    }
    for (size_t i = lane; i < w.requests.size(); i += lanes) {
      otlp::collector::metrics::v1::ExportMetricsServiceResponse response;
      if (way == "otlp_grpc") {
        grpc::ClientContext context;
        grpc::Status status = otlp_stub->Export(&context, w.requests[i], &response);
        if (!status.ok()) fail(status.error_message());
      } else {
        const bool json = way == "otlp_http_json";
        absl::StatusOr<test_util::HttpResult> answer = test_util::HttpCall(
            http_port, "POST", "/v1/metrics",
            json ? w.json_bodies[i] : w.protobuf_bodies[i], absl::Seconds(60),
            json ? "Content-Type: application/json\r\n"
                 : "Content-Type: application/x-protobuf\r\n");
        if (!answer.ok()) {
          fail(answer.status().ToString());
        } else if (answer->status != 200 ||
                   !(json ? google::protobuf::util::JsonStringToMessage(answer->body,
                                                                        &response)
                                .ok()
                          : response.ParseFromString(answer->body))) {
          fail(absl::StrCat(answer->status, " ", answer->body.substr(0, 200)));
        }
      }
      if (response.partial_success().rejected_data_points() > 0) {
        fail(response.partial_success().error_message());
      }
    }
  };
  Load load;
  const CpuUse before = CpuUse::Now(postmaster, {metricsd->pid()});
  const absl::Time start = absl::Now();
  std::vector<std::thread> senders;
  const int in_flight = way == "stream" ? 1 : absl::GetFlag(FLAGS_otlp_in_flight);
  for (size_t s = 0; s < work.size(); ++s) {
    for (int lane = 0; lane < in_flight; ++lane) {
      senders.emplace_back([&, s, lane] { send(work[s], s, lane, in_flight); });
    }
  }
  for (auto& t : senders) t.join();
  load.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  load.cpu = CpuUse::Now(postmaster, {metricsd->pid()}) - before;
  load.failure = failure;
  metricsd->Signal(SIGTERM);
  (void)metricsd->Wait(absl::Seconds(60));
  load.stored = storage::pg::test_util::CountRawValues(db->url(), kTrial).value_or(-1);
  return load;
}

int Run() {
  const int senders = absl::GetFlag(FLAGS_senders);
  const int per_sender = absl::GetFlag(FLAGS_reports) / senders;
  std::vector<Work> work = BuildWork(senders, per_sender, absl::GetFlag(FLAGS_batch_reports));
  const int64_t values = int64_t{senders} * per_sender * test_util::kRealisticValuesPerReport;
  size_t json_bytes = 0, protobuf_bytes = 0, requests = 0;
  for (const Work& w : work) {
    requests += w.requests.size();
    for (const std::string& b : w.json_bodies) json_bytes += b.size();
    for (const std::string& b : w.protobuf_bodies) protobuf_bytes += b.size();
  }

  const absl::StatusOr<pid_t> found = BenchPostmaster();
  if (!found.ok()) {
    std::fprintf(stderr, "bench: %s\n", found.status().ToString().c_str());
    return 1;
  }
  const pid_t postmaster = *found;

  std::printf("%d senders x %d reports x 25 values = %lld values a load; %zu requests of "
              "%d reports\nOTLP bodies: protobuf %.1f bytes a value, JSON %.1f\n\n",
              senders, per_sender, static_cast<long long>(values), requests,
              absl::GetFlag(FLAGS_batch_reports), 1.0 * protobuf_bytes / values,
              1.0 * json_bytes / values);
  for (const std::string& way : absl::GetFlag(FLAGS_ways)) {
    if (way != "stream" && way != "otlp_grpc" && way != "otlp_http_pb" &&
        way != "otlp_http_json") {
      std::fprintf(stderr, "bench: --ways: unknown way \"%s\"\n", way.c_str());
      return 2;
    }
  }
  bool ok = true;
  absl::StatusOr<std::map<std::string, Load>> rounds = RunRounds(
      absl::GetFlag(FLAGS_ways), absl::GetFlag(FLAGS_rounds), values, 16,
      [&](const std::string& way) { return RunLoad(way, work, postmaster); }, ok);
  if (!rounds.ok()) {
    std::fprintf(stderr, "bench: %s\n", rounds.status().ToString().c_str());
    return 1;
  }
  std::map<std::string, Load>& best = *rounds;

  // The server's side (metricsd and PostgreSQL) is what an operator pays;
  // the client's share differs by way (gRPC serialises in the clock).
  const bool with_stream = best.count("stream") > 0;
  const Load& stream = best["stream"];
  std::printf("\nbest of each%s:\n", with_stream ? ", against the stream" : "");
  std::string json = absl::StrFormat("{\"values\": %d", values);
  for (const std::string& way : absl::GetFlag(FLAGS_ways)) {
    const Load& l = best[way];
    const double per_s = values / l.seconds;
    const double server_ns = 1e9 * (l.cpu.metricsd + l.cpu.postgres) / values;
    absl::StrAppendFormat(&json,
                          ", \"%s_values_per_s\": %.0f, \"%s_cpu_ns_per_value\": %.0f, "
                          "\"%s_server_cpu_ns_per_value\": %.0f",
                          way, per_s, way, 1e9 * l.cpu.Total() / values, way, server_ns);
    if (!with_stream || way == "stream") {
      std::printf("  %-16s %12.0f values/s  server CPU %.0f ns a value\n", way.c_str(), per_s,
                  server_ns);
      continue;
    }
    const double throughput_ratio = stream.seconds / l.seconds;
    const double server_ratio = (l.cpu.metricsd + l.cpu.postgres) /
                                (stream.cpu.metricsd + stream.cpu.postgres);
    const double md_ratio = l.cpu.metricsd / stream.cpu.metricsd;
    std::printf("  %-16s %12.0f values/s  throughput %.2fx  server CPU %.0f ns a value, %.2fx "
                "(metricsd's %.2fx)\n",
                way.c_str(), per_s, throughput_ratio, server_ns, server_ratio, md_ratio);
    absl::StrAppendFormat(&json,
                          ", \"%s_throughput_ratio\": %.3f, \"%s_server_cpu_ratio\": %.3f, "
                          "\"%s_metricsd_cpu_ratio\": %.3f",
                          way, throughput_ratio, way, server_ratio, way, md_ratio);
  }
  std::printf("%s, \"all_stored\": %s}\n", json.c_str(), ok ? "true" : "false");
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace metrics::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "The OTLP ingest benchmark: the same values through the service's stream, "
      "OTLP/gRPC, OTLP/HTTP protobuf and OTLP/HTTP JSON. Run it with bench/otlp.sh.");
  absl::ParseCommandLine(argc, argv);
  return metrics::bench::Run();
}

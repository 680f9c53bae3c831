// OTLP/HTTP bodies: protobuf and OTLP's JSON (its relaxed rules), gzip, and
// what is refused: a truncated message, an unknown content type or
// encoding, bad gzip, a body or a gzip bomb past the limit.
#include "server/otlp/otlp_body.h"

#include <zlib.h>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"

namespace metrics::server {
namespace {

using ::metrics::test_util::StatusIs;
using ::testing::_;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Pair;

std::string Gzip(const std::string& text, int level = Z_BEST_COMPRESSION) {
  z_stream z{};
  deflateInit2(&z, level, Z_DEFLATED, 16 + MAX_WBITS, 9, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, text.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

opentelemetry::proto::collector::metrics::v1::ExportMetricsServiceRequest Sample() {
  opentelemetry::proto::collector::metrics::v1::ExportMetricsServiceRequest request;
  auto* rm = request.add_resource_metrics();
  auto* kv = rm->mutable_resource()->add_attributes();
  kv->set_key("trial.id");
  kv->mutable_value()->set_int_value(7);
  auto* m = rm->add_scope_metrics()->add_metrics();
  m->set_name("train.loss");
  auto* p = m->mutable_gauge()->add_data_points();
  p->set_time_unix_nano(1790000000000000000ULL);
  p->set_as_double(0.5);
  return request;
}

TEST(OtlpBodyTest, ProtobufPlainAndGzipped) {
  const std::string bytes = Sample().SerializeAsString();
  ASSERT_OK_AND_ASSIGN(auto plain, DecodeOtlpBody("application/x-protobuf", "", bytes));
  EXPECT_EQ(plain.resource_metrics(0).scope_metrics(0).metrics(0).name(), "train.loss");
  ASSERT_OK_AND_ASSIGN(auto gzipped,
                       DecodeOtlpBody("application/x-protobuf", "gzip", Gzip(bytes)));
  EXPECT_EQ(gzipped.SerializeAsString(), bytes);
}

// OTLP's JSON: camelCase, 64-bit integers as strings, enums as numbers,
// unknown fields (here a hex traceId in an exemplar) ignored.
TEST(OtlpBodyTest, OtlpJsonWithItsOwnRules) {
  const std::string json = R"({"resourceMetrics":[{"resource":{"attributes":[
      {"key":"trial.id","value":{"intValue":"7"}}]},"scopeMetrics":[{"metrics":[
      {"name":"bytes","unit":"By","sum":{"aggregationTemporality":2,"isMonotonic":true,
       "dataPoints":[{"timeUnixNano":"1790000000000000000","asInt":"42",
       "exemplars":[{"traceId":"5b8efff798038103d269b633813fc60c"}]}]}}]}],
      "futureField":{"x":1}}]})";
  ASSERT_OK_AND_ASSIGN(auto request,
                       DecodeOtlpBody("application/json; charset=utf-8", "", json));
  const auto& sum = request.resource_metrics(0).scope_metrics(0).metrics(0).sum();
  EXPECT_EQ(sum.aggregation_temporality(),
            opentelemetry::proto::metrics::v1::AGGREGATION_TEMPORALITY_CUMULATIVE);
  EXPECT_EQ(sum.data_points(0).as_int(), 42);
  EXPECT_EQ(request.resource_metrics(0).resource().attributes(0).value().int_value(), 7);
}

TEST(OtlpBodyTest, HostileBodiesAreRefusedWithTheirReason) {
  const std::string bytes = Sample().SerializeAsString();
  EXPECT_THAT(DecodeOtlpBody("application/x-protobuf", "", bytes.substr(0, bytes.size() - 3)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("protobuf")));
  EXPECT_THAT(DecodeOtlpBody("text/plain", "", bytes),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("Content-Type")));
  EXPECT_THAT(DecodeOtlpBody("application/x-protobuf", "br", bytes),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("only gzip")));
  EXPECT_THAT(DecodeOtlpBody("application/x-protobuf", "gzip", bytes),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not valid gzip")));
  const std::string gz = Gzip(bytes);
  EXPECT_THAT(DecodeOtlpBody("application/x-protobuf", "gzip", gz.substr(0, gz.size() / 2)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(DecodeOtlpBody("application/json", "", "{\"resourceMetrics\": ["),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("JSON")));
  std::string deep;
  for (int i = 0; i < 10000; ++i) deep += "{\"arrayValue\":{\"values\":[";
  EXPECT_THAT(DecodeOtlpBody("application/json", "",
                             R"({"resourceMetrics":[{"resource":{"attributes":[{"key":"k","value":)" +
                                 deep),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(DecodeOtlpBody("application/x-protobuf", "", std::string(2000, 'x'), 1000),
              StatusIs(absl::StatusCode::kResourceExhausted));
}

// A gzip bomb: 256 MiB of zeros in a few hundred KiB is refused once the
// limit (64 MiB) is inflated, not after inflating it all.
TEST(OtlpBodyTest, GzipBombIsRefusedAtTheLimit) {
  const std::string bomb = Gzip(std::string(size_t{256} << 20, '\0'), Z_BEST_SPEED);
  ASSERT_LT(bomb.size(), size_t{4} << 20);
  const absl::Time start = absl::Now();
  EXPECT_THAT(DecodeOtlpBody("application/x-protobuf", "gzip", bomb),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("inflates past")));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(OtlpBodyTest, ErrorsAnswerInTheRequestsEncoding) {
  const absl::Status full = absl::ResourceExhaustedError("the ingest queue is full");
  HttpResponse proto = OtlpErrorResponse("application/x-protobuf", full, 0,
                                         absl::Milliseconds(2500));
  EXPECT_EQ(proto.status, 429);
  EXPECT_EQ(proto.content_type, "application/x-protobuf");
  google::rpc::Status status;
  ASSERT_TRUE(status.ParseFromString(proto.body));
  EXPECT_EQ(status.code(), static_cast<int>(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(status.message(), "the ingest queue is full");
  EXPECT_THAT(proto.headers, Contains(Pair("Retry-After", "3")));

  HttpResponse json = OtlpErrorResponse("application/json; charset=utf-8",
                                        absl::UnavailableError("the database is down"));
  EXPECT_EQ(json.status, 503);
  EXPECT_EQ(json.body, R"({"code":14,"message":"the database is down","details":[]})");
  EXPECT_THAT(json.headers, Contains(Pair("Retry-After", "1")));

  HttpResponse bad = OtlpErrorResponse("application/x-protobuf",
                                       absl::InvalidArgumentError("truncated"), 400);
  EXPECT_EQ(bad.status, 400);
  EXPECT_THAT(bad.headers, Not(Contains(Pair("Retry-After", _))));
}

}  // namespace
}  // namespace metrics::server

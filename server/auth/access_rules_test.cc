// The access rules over every method of every service, from the protos'
// descriptors (so a method added later without a rule fails here), and the
// decision for each role on requests naming the caller's trial, another
// trial, or none.
#include "server/auth/access_rules.h"

#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/determined/api/v1/profiler.pb.h"
#include "proto/metrics/v1/ingest.pb.h"
#include "proto/metrics/v1/query.pb.h"
#include "proto/metrics/v1/trials.pb.h"
#include "server/auth/testing/served_protos.h"

namespace metrics::server {
namespace {

using google::protobuf::Message;
using google::protobuf::MethodDescriptor;
using storage::TokenRole;
using test_util::FullName;
using test_util::NewRequest;
using test_util::ServedMethods;
using test_util::SetInt32At;
using ::testing::HasSubstr;

// A request of `method` naming trial `trial` at the rule's first path (0:
// none).
std::unique_ptr<Message> Request(const MethodDescriptor* method,
                                 const MethodRule& rule, int32_t trial) {
  std::unique_ptr<Message> request = NewRequest(method);
  if (trial != 0 && !rule.trial_paths.empty()) {
    EXPECT_TRUE(SetInt32At(*request, rule.trial_paths[0], trial))
        << FullName(method);
  }
  return request;
}

TEST(AccessRulesTest, EveryServedMethodHasARuleWhosePathsExist) {
  std::vector<const MethodDescriptor*> methods = ServedMethods();
  ASSERT_EQ(methods.size(), 21u);
  for (const MethodDescriptor* m : methods) {
    const MethodRule* rule = RuleFor(FullName(m));
    ASSERT_NE(rule, nullptr) << FullName(m) << " has no access rule";
    const bool trial_scoped = rule->access == Access::kReadTrial ||
                              rule->access == Access::kIngestTrial;
    EXPECT_EQ(trial_scoped, !rule->trial_paths.empty()) << FullName(m);
    for (const std::string& path : rule->trial_paths) {
      std::unique_ptr<Message> request = NewRequest(m);
      EXPECT_TRUE(SetInt32At(*request, path, 42)) << FullName(m) << " " << path;
      EXPECT_THAT(TrialsOf(*rule, *request), ::testing::ElementsAre(42))
          << FullName(m) << " " << path;
    }
  }
  // Rules name only methods that exist (health and reflection are gRPC's).
  for (const std::string& name : MethodsWithRules()) {
    if (absl::StartsWith(name, "/grpc.")) continue;
    bool found = false;
    for (const MethodDescriptor* m : methods) found |= FullName(m) == name;
    EXPECT_TRUE(found) << name << " is not a served method";
  }
  EXPECT_EQ(RuleFor("/metrics.v1.QueryService/DropEverything"), nullptr);
  EXPECT_EQ(RuleFor(""), nullptr);
}

TEST(AccessRulesTest, EachRoleGetsWhatItsRuleAllows) {
  const Principal admin{1, TokenRole::kAdmin, std::nullopt};
  const Principal viewer{2, TokenRole::kViewer, std::nullopt};
  const Principal reporter{3, TokenRole::kReporter, 7};
  int checked = 0;
  for (const MethodDescriptor* m : ServedMethods()) {
    const std::string name = FullName(m);
    const MethodRule& rule = *RuleFor(name);
    for (int32_t trial : {7, 8, 0}) {
      std::unique_ptr<Message> request = Request(m, rule, trial);
      const bool read =
          rule.access == Access::kRead || rule.access == Access::kReadTrial;
      const bool scoped = rule.access == Access::kReadTrial ||
                          rule.access == Access::kIngestTrial;
      EXPECT_TRUE(Authorize(admin, name, rule, *request, true).ok()) << name;
      EXPECT_EQ(Authorize(viewer, name, rule, *request, true).ok(), read)
          << name << " trial " << trial;
      // OTLP names its trials in data: the service keeps a reporter to its
      // own (OtlpServiceTest.PartialSuccessForWhatIsRefused).
      const bool per_resource = rule.access == Access::kIngestPerResource;
      EXPECT_EQ(Authorize(reporter, name, rule, *request, true).ok(),
                per_resource || (scoped && trial == 7))
          << name << " trial " << trial;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 63);
}

TEST(AccessRulesTest, DenialsSayWhatIsMissingAndNothingElse) {
  const Principal viewer{2, TokenRole::kViewer, std::nullopt};
  const Principal reporter{3, TokenRole::kReporter, 7};
  v1::CreateTrialRequest create;
  const std::string kCreate = "/metrics.v1.TrialService/CreateTrial";
  absl::Status s = Authorize(viewer, kCreate, *RuleFor(kCreate), create, true);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(s.message(),
            "a viewer token may not call TrialService.CreateTrial; it needs an "
            "admin token");
  v1::ReportSystemMetricsRequest report;
  report.mutable_batch()->set_trial_id(8);
  const std::string kReport = "/metrics.v1.IngestService/ReportSystemMetrics";
  s = Authorize(reporter, kReport, *RuleFor(kReport), report, true);
  EXPECT_EQ(s.message(),
            "a reporter token may not call IngestService.ReportSystemMetrics "
            "for trial 8; it is for trial 7 only");
  s = Authorize(viewer, kReport, *RuleFor(kReport), report, true);
  EXPECT_THAT(s.message(), HasSubstr("a viewer token only reads"));
}

TEST(AccessRulesTest, AStreamIsCheckedAtItsOpenAndOnEveryTrialItNames) {
  const Principal reporter{3, TokenRole::kReporter, 7};
  const std::string kStream = "/metrics.v1.IngestService/StreamSystemMetrics";
  const MethodRule& rule = *RuleFor(kStream);
  v1::StreamSystemMetricsRequest open;
  open.mutable_open()->set_trial_id(7);
  EXPECT_TRUE(Authorize(reporter, kStream, rule, open, true).ok());
  v1::StreamSystemMetricsRequest batch;
  batch.mutable_batch()->set_trial_id(0);  // the stream's trial
  EXPECT_TRUE(Authorize(reporter, kStream, rule, batch, false).ok());
  EXPECT_FALSE(Authorize(reporter, kStream, rule, batch, true).ok());
  batch.mutable_batch()->set_trial_id(8);
  EXPECT_FALSE(Authorize(reporter, kStream, rule, batch, false).ok());
}

TEST(AccessRulesTest, ALegacyPostMustNameOnlyTheReportersTrial) {
  const Principal reporter{3, TokenRole::kReporter, 7};
  const std::string kPost =
      "/determined.api.v1.Determined/PostTrialProfilerMetricsBatch";
  determined::api::v1::PostTrialProfilerMetricsBatchRequest post;
  post.add_batches()->mutable_labels()->set_trial_id(7);
  EXPECT_TRUE(Authorize(reporter, kPost, *RuleFor(kPost), post, true).ok());
  post.add_batches()->mutable_labels()->set_trial_id(8);
  EXPECT_FALSE(Authorize(reporter, kPost, *RuleFor(kPost), post, true).ok());
}

}  // namespace
}  // namespace metrics::server

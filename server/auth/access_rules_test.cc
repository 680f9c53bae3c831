// The access rules over every method of every service, from the protos'
// descriptors (so a method added later without a rule fails here), the
// check metricsd makes of them before it starts, and the
// decision for each role on requests naming the caller's trial, another
// trial, or none.
#include "server/auth/access_rules.h"

#include <memory>
#include <optional>
#include <string>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/determined/api/v1/profiler.pb.h"
#include "proto/metrics/v1/access.pb.h"
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
using test_util::ServedProtoFiles;
using test_util::ServedMethods;
using test_util::SetInt32At;
using ::testing::HasSubstr;
using ::testing::Not;

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
  EXPECT_EQ(RuleFor("/metrics.v1.QueryService/DropEverything"), nullptr);
  EXPECT_EQ(RuleFor(""), nullptr);
}

TEST(AccessRulesTest, TheServedServicesPassTheCheckAtStart) {
  std::vector<const google::protobuf::ServiceDescriptor*> services;
  for (const google::protobuf::FileDescriptor* file : ServedProtoFiles()) {
    for (int s = 0; s < file->service_count(); ++s) services.push_back(file->service(s));
  }
  ASSERT_EQ(services.size(), 6u);
  EXPECT_OK(CheckAccessRules(services));
}

// A service of methods with no rule, an unspecified one, trial paths that
// lead nowhere or to a string, and a good rule: the check names each bad
// one and what is wrong, and leaves the good one out.
TEST(AccessRulesTest, TheCheckAtStartNamesEveryMethodWithoutAGoodRule) {
  google::protobuf::FileDescriptorProto file;
  file.set_name("unruled.proto");
  file.set_package("unruled");
  file.set_syntax("proto3");
  google::protobuf::DescriptorProto* request = file.add_message_type();
  request->set_name("Request");
  google::protobuf::FieldDescriptorProto* field = request->add_field();
  field->set_name("trial_id");
  field->set_number(1);
  field->set_type(google::protobuf::FieldDescriptorProto::TYPE_INT32);
  field->set_label(google::protobuf::FieldDescriptorProto::LABEL_OPTIONAL);
  field = request->add_field();
  field->set_name("name");
  field->set_number(2);
  field->set_type(google::protobuf::FieldDescriptorProto::TYPE_STRING);
  field->set_label(google::protobuf::FieldDescriptorProto::LABEL_OPTIONAL);
  google::protobuf::ServiceDescriptorProto* service = file.add_service();
  service->set_name("Unruled");
  auto add = [&](const std::string& name, std::optional<v1::AccessRule> rule) {
    google::protobuf::MethodDescriptorProto* method = service->add_method();
    method->set_name(name);
    method->set_input_type(".unruled.Request");
    method->set_output_type(".unruled.Request");
    if (rule) *method->mutable_options()->MutableExtension(v1::access) = *rule;
  };
  v1::AccessRule rule;
  add("NoRule", std::nullopt);
  add("Unspecified", rule);
  rule.set_access(v1::ACCESS_READ_TRIAL);
  add("NoPaths", rule);
  rule.add_trial_paths("trial_id.deeper");
  add("PastAnInt", rule);
  rule.set_trial_paths(0, "nope");
  add("NoSuchField", rule);
  rule.set_trial_paths(0, "name");
  add("AString", rule);
  rule.set_trial_paths(0, "trial_id");
  add("Good", rule);
  google::protobuf::DescriptorPool pool(google::protobuf::DescriptorPool::generated_pool());
  ASSERT_NE(pool.BuildFile(file), nullptr);

  absl::Status s = CheckAccessRules({pool.FindServiceByName("unruled.Unruled")});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("/unruled.Unruled/NoRule: no access rule"));
  EXPECT_THAT(s.message(), HasSubstr("/unruled.Unruled/Unspecified: no access rule"));
  EXPECT_THAT(s.message(), HasSubstr("/unruled.Unruled/NoPaths: its access needs trial_paths"));
  EXPECT_THAT(s.message(),
              HasSubstr("/unruled.Unruled/PastAnInt: trial path \"trial_id.deeper\": no field deeper"));
  EXPECT_THAT(s.message(),
              HasSubstr("/unruled.Unruled/NoSuchField: trial path \"nope\": no field nope"));
  EXPECT_THAT(s.message(),
              HasSubstr("/unruled.Unruled/AString: trial path \"name\": name is not an int32"));
  EXPECT_THAT(s.message(), Not(HasSubstr("Good")));
  // Not on the server's methods either: the pool it serves from does not
  // know these.
  EXPECT_EQ(RuleFor("/unruled.Unruled/Good"), nullptr);
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

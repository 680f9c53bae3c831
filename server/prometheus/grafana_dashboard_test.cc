// The Grafana dashboard that docker-compose provisions
// (deploy/grafana/dashboards/profiler.json) against what GET /metrics
// really exports: it must parse, have the trial variable the profiler
// page's link sets, chart every system metric of the design per trial, and
// name no metric that metricsd does not export, in valid PromQL (checked
// by promtool, from Debian's prometheus package).
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/prometheus/prometheus_exporter.h"

namespace metrics::server {
namespace {

using ::google::protobuf::Struct;
using ::google::protobuf::Value;
using ::testing::Contains;
using ::testing::HasSubstr;

// The system metrics the dashboard charts, with the units the agent reports
// them in.
const std::vector<std::pair<std::string, std::string>> kSystemMetrics = {
    {"gpu_util", "percent"},
    {"gpu_free_memory", "bytes"},
    {"gpu_power", "watts"},
    {"gpu_power_limit", "watts"},
    {"gpu_temperature", "celsius"},
    {"gpu_memory_used", "bytes"},
    {"gpu_memory_total", "bytes"},
    {"cpu_util_simple", "percent"},
    {"memory_free", "bytes"},
    {"disk_iops", "operations/s"},
    {"disk_throughput_read", "bytes/s"},
    {"disk_throughput_write", "bytes/s"},
    {"net_throughput_sent", "bytes/s"},
    {"net_throughput_recv", "bytes/s"},
};

Struct Dashboard() {
  std::ifstream in(METRICS_DASHBOARD_PATH);
  std::stringstream text;
  text << in.rdbuf();
  Struct dashboard;
  const auto status =
      google::protobuf::util::JsonStringToMessage(text.str(), &dashboard);
  EXPECT_TRUE(status.ok()) << METRICS_DASHBOARD_PATH << ": " << status;
  return dashboard;
}

// Every metric family a /metrics page declares with "# TYPE", from a page
// rendered with one latest value of each system metric.
std::set<std::string> ExportedFamilies() {
  ServiceStatistics statistics;
  PrometheusExportInput input;
  input.statistics = &statistics;
  input.legacy_calls = {{"GetTrialProfilerMetrics", 1}};
  std::vector<storage::LatestValue> latest;
  for (const auto& [name, unit] : kSystemMetrics) {
    latest.push_back({1, "agent", "", name, unit, 1});
  }
  input.max_latest_series = latest.size();
  input.latest = storage::LatestValues{std::move(latest), {}, 0};
  std::set<std::string> families;
  std::istringstream page(RenderPrometheusExport(input));
  const std::regex type_line("# TYPE (\\S+) (\\S+)");
  for (std::string line; std::getline(page, line);) {
    std::smatch m;
    if (!std::regex_match(line, m, type_line)) continue;
    families.insert(m[1]);
    if (m[2] == "histogram") {
      for (const char* suffix : {"_bucket", "_sum", "_count"}) {
        families.insert(m[1].str() + suffix);
      }
    }
  }
  return families;
}

// The PromQL of every panel target.
std::vector<std::string> PanelExpressions(const Struct& dashboard) {
  std::vector<std::string> exprs;
  for (const Value& panel : dashboard.fields().at("panels").list_value().values()) {
    const auto& fields = panel.struct_value().fields();
    if (fields.count("targets") == 0) continue;
    for (const Value& target : fields.at("targets").list_value().values()) {
      exprs.push_back(target.struct_value().fields().at("expr").string_value());
    }
  }
  return exprs;
}

// The panels' PromQL and the variables' label_values(...) queries.
std::vector<std::string> Expressions(const Struct& dashboard) {
  std::vector<std::string> exprs = PanelExpressions(dashboard);
  for (const Value& variable :
       dashboard.fields().at("templating").struct_value().fields().at("list")
           .list_value().values()) {
    exprs.push_back(variable.struct_value().fields().at("definition").string_value());
  }
  return exprs;
}

TEST(GrafanaDashboardTest, ParsesWithTheTrialVariableThePageLinksTo) {
  const Struct dashboard = Dashboard();
  // server/web_assets' page links to /d/metricsd-profiler/...?var-trial_id=.
  EXPECT_EQ(dashboard.fields().at("uid").string_value(), "metricsd-profiler");
  std::vector<std::string> variables;
  for (const Value& v : dashboard.fields().at("templating").struct_value()
                            .fields().at("list").list_value().values()) {
    variables.push_back(v.struct_value().fields().at("name").string_value());
  }
  EXPECT_THAT(variables, Contains("trial_id"));
}

// promtool's verdict on the panels' PromQL, each as a recording rule:
// its output, with the exit code when it failed.
std::string PromtoolCheckRules(const std::vector<std::string>& exprs) {
  const std::string path = ::testing::TempDir() + "/dashboard_rules_" +
                           std::to_string(getpid()) + ".yml";
  {
    std::ofstream rules(path);
    rules << "groups:\n  - name: dashboard\n    rules:\n";
    for (size_t i = 0; i < exprs.size(); ++i) {
      // Single-quoted YAML: a quote is written twice.
      std::string quoted = std::regex_replace(exprs[i], std::regex("'"), "''");
      rules << "      - record: panel_" << i << "\n        expr: '" << quoted
            << "'\n";
    }
  }
  FILE* p = popen(("promtool check rules " + path + " 2>&1").c_str(), "r");
  std::string out;
  char buffer[4096];
  while (p != nullptr && fgets(buffer, sizeof buffer, p) != nullptr) out += buffer;
  const int code = p == nullptr ? -1 : pclose(p);
  std::remove(path.c_str());
  return code == 0 ? "" : "exit " + std::to_string(code) + ": " + out;
}

TEST(GrafanaDashboardTest, PanelQueriesAreValidPromql) {
  const std::vector<std::string> exprs = PanelExpressions(Dashboard());
  ASSERT_GE(exprs.size(), 10u);
  EXPECT_EQ(PromtoolCheckRules(exprs), "");
  EXPECT_THAT(PromtoolCheckRules({"sum(rate(x[1m])"}), HasSubstr("exit"));
}

TEST(GrafanaDashboardTest, NamesOnlyExportedMetricsAndChartsEverySystemMetric) {
  const std::set<std::string> exported = ExportedFamilies();
  ASSERT_THAT(exported, Contains("metricsd_ingested_samples_total"));
  const std::regex metric("\\b((profiler|metricsd)_[a-zA-Z0-9_]+)");
  std::set<std::string> used;
  for (const std::string& expr : Expressions(Dashboard())) {
    for (std::sregex_iterator it(expr.begin(), expr.end(), metric), end;
         it != end; ++it) {
      const std::string name = (*it)[1];
      used.insert(name);
      EXPECT_THAT(exported, Contains(name)) << "in " << expr;
      if (name.rfind("profiler_", 0) == 0) {
        EXPECT_THAT(expr, HasSubstr("trial_id=\"$trial_id\"")) << expr;
      }
    }
  }
  for (const auto& [name, unit] : kSystemMetrics) {
    EXPECT_THAT(used, Contains(TrialSeriesName(name, unit).name)) << name;
  }
}

}  // namespace
}  // namespace metrics::server

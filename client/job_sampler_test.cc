// The job's share on fixture trees: a proc(5) tree of a 128-CPU host with a
// job's process tree and a stranger, written by each test; the cgroup v2 and
// v1 hierarchies of client/testdata/cgroup_cases.json, which the Python
// profiler's tests read too; and the fake NVML's compute processes.
#include "client/job_sampler.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/testing/json_file.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace metrics::client {
namespace {

namespace fs = std::filesystem;
using ::metrics::test_util::StatusIs;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

class JobSamplerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            absl::StrCat("job_sampler_test_", getpid(), "_",
                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    std::string stat = "cpu  1 2 3 4 5 6 7 8 0 0\n";
    for (int i = 0; i < 128; ++i) absl::StrAppend(&stat, "cpu", i, " 1 2 3 4 5 6 7 8 0 0\n");
    Write("proc/stat", stat);
    // The job: 100, its child 101, grandchild 102 (a name with spaces and
    // parentheses); 200 is someone else's.
    Process(100, 1, 1000, 1000);
    Process(101, 100, 500, 500);
    Process(102, 101, 0, 250);
    Process(200, 1, 0, 9999);
  }
  void TearDown() override { fs::remove_all(root_); }

  void Write(const std::string& path, const std::string& text) {
    fs::create_directories((root_ / path).parent_path());
    std::ofstream(root_ / path) << text;
  }
  void Process(int pid, int parent, int ticks, int rss_pages) {
    // utime (field 14) holds all the ticks; stime (15) is 0.
    Write(absl::StrCat("proc/", pid, "/stat"),
          absl::StrCat(pid, " (python (train) x) S ", parent,
                       " 1 1 0 -1 4194560 0 0 0 0 ", ticks,
                       " 0 0 0 20 0 1 0 100 1000000 ", rss_pages, " 0\n"));
  }
  JobOptions Options() {
    JobOptions o;
    o.proc_root = (root_ / "proc").string();
    o.cgroup_root = (root_ / "cgroup").string();
    o.ticks_per_second = 100;
    o.page_bytes = 4096;
    return o;
  }
  // The values of one Take, by name (and GPU).
  std::map<std::string, double> Take(JobSampler& sampler, Clock::time_point at,
                                     Nvml* nvml = nullptr) {
    std::vector<Measurement> out;
    std::vector<absl::Status> errors;
    sampler.Take(at, nvml, out, errors);
    for (const absl::Status& e : errors) ADD_FAILURE() << e;
    std::map<std::string, double> values;
    for (const Measurement& m : out) {
      values[m.gpu_uuid.empty() ? std::string(m.name)
                                : absl::StrCat(m.name, "/", m.gpu_uuid)] = m.value;
    }
    return values;
  }

  fs::path root_;
  const Clock::time_point t0_ = Clock::now();
};

TEST_F(JobSamplerTest, ProcessTreeCpuAndResidentMemory) {
  JobOptions o = Options();
  o.pid = 100;
  ASSERT_OK_AND_ASSIGN(auto sampler, JobSampler::Create(o, t0_));
  // In 2 s: 100 used one CPU, 101 and 102 half a CPU each; 200 is not ours.
  Process(100, 1, 1200, 1000);
  Process(101, 100, 600, 500);
  Process(102, 101, 100, 250);
  Process(200, 1, 5000, 9999);
  std::map<std::string, double> v = Take(*sampler, t0_ + std::chrono::seconds(2));
  EXPECT_DOUBLE_EQ(v["process_cpu_util"], 200);
  EXPECT_DOUBLE_EQ(v["process_memory_rss"], 1750.0 * 4096);
  EXPECT_EQ(v.count("cgroup_cpu_util"), 0u);
  // One that exited no longer counts; a new one is found by the next walk
  // of the tree (every 10 s), and its CPU counts from its second sample.
  Process(103, 100, 50, 10);
  fs::remove_all(root_ / "proc/102");
  v = Take(*sampler, t0_ + std::chrono::seconds(3));
  EXPECT_DOUBLE_EQ(v["process_cpu_util"], 0);
  EXPECT_DOUBLE_EQ(v["process_memory_rss"], 1500.0 * 4096);
  v = Take(*sampler, t0_ + std::chrono::seconds(12));
  EXPECT_DOUBLE_EQ(v["process_memory_rss"], 1510.0 * 4096);
  Process(103, 100, 950, 10);
  v = Take(*sampler, t0_ + std::chrono::seconds(21));
  EXPECT_DOUBLE_EQ(v["process_cpu_util"], 100);
}

// Every case of the fixtures the Python profiler reads too
// (client/testdata/cgroup_cases.json): v2 by quota, cpuset or neither; v1
// apart and together, found by path or as "self".
TEST_F(JobSamplerTest, EverySharedCgroupCase) {
  const boost::json::value table = test_util::ReadJsonFile(TESTDATA_DIR "/cgroup_cases.json");
  ASSERT_FALSE(table.is_null());
  for (const boost::json::value& c : table.at("cases").as_array()) {
    SCOPED_TRACE(std::string(c.at("name").as_string()));
    fs::remove_all(root_ / "cgroup");
    fs::remove_all(root_ / "proc/self");
    std::string stat = "cpu  1 2 3 4 5 6 7 8 0 0\n";
    for (int i = 0; i < c.at("host_cpus").as_int64(); ++i) {
      absl::StrAppend(&stat, "cpu", i, " 1 2 3 4 5 6 7 8 0 0\n");
    }
    Write("proc/stat", stat);
    JobOptions o = Options();
    o.cgroup = std::string(c.at("cgroup").as_string());
    std::unique_ptr<JobSampler> sampler;
    Clock::time_point at = t0_;
    for (const boost::json::value& step : c.at("steps").as_array()) {
      const boost::json::object& s = step.as_object();
      if (s.contains("removed")) {
        for (const boost::json::value& path : s.at("removed").as_array()) {
          fs::remove(root_ / std::string(path.as_string()));
        }
      }
      for (const auto& [path, contents] : s.at("files").as_object()) {
        Write(std::string(path), std::string(contents.as_string()));
      }
      if (sampler == nullptr) {
        ASSERT_OK_AND_ASSIGN(sampler, JobSampler::Create(o, at));
        continue;
      }
      at += std::chrono::seconds(s.at("after_s").as_int64());
      std::map<std::string, double> v = Take(*sampler, at);
      for (const auto& [name, value] : s.at("expect").as_object()) {
        SCOPED_TRACE(std::string(name));
        ASSERT_EQ(v.count(std::string(name)), 1u);
        EXPECT_NEAR(v[std::string(name)], value.to_number<double>(),
                    1e-9 * std::abs(value.to_number<double>()));
      }
      if (s.contains("absent")) {
        for (const boost::json::value& name : s.at("absent").as_array()) {
          EXPECT_EQ(v.count(std::string(name.as_string())), 0u) << name;
        }
      }
    }
  }
}

// The job's processes are its cgroup's, sub-cgroups included.
TEST_F(JobSamplerTest, ACgroupsProcessesIncludeItsSubCgroups) {
  Write("cgroup/cgroup.controllers", "cpuset cpu io memory pids\n");
  Write("cgroup/slurm/job_7/cpu.stat", "usage_usec 5000000\n");
  Write("cgroup/slurm/job_7/cpu.max", "800000 100000\n");
  Write("cgroup/slurm/job_7/memory.current", "1073741824\n");
  Write("cgroup/slurm/job_7/memory.max", "max\n");
  Write("cgroup/slurm/job_7/cgroup.procs", "100\n101\n");
  Write("cgroup/slurm/job_7/step_0/cgroup.procs", "102\n");
  JobOptions o = Options();
  o.cgroup = "/slurm/job_7";
  ASSERT_OK_AND_ASSIGN(auto sampler, JobSampler::Create(o, t0_));
  Process(101, 100, 600, 500);  // half a CPU over the 2 s
  std::map<std::string, double> v = Take(*sampler, t0_ + std::chrono::seconds(2));
  EXPECT_DOUBLE_EQ(v["process_cpu_util"], 50);
  EXPECT_DOUBLE_EQ(v["process_memory_rss"], 1750.0 * 4096);
}

// "self": the cgroup this process is in, from /proc/self/cgroup.
TEST_F(JobSamplerTest, SelfIsTheOwnCgroup) {
  Write("proc/self/cgroup", "0::/user.slice/session-1.scope\n");
  Write("cgroup/cgroup.controllers", "cpu memory\n");
  Write("cgroup/user.slice/session-1.scope/cpu.stat", "usage_usec 10\n");
  Write("cgroup/user.slice/session-1.scope/memory.current", "4096\n");
  Write("cgroup/user.slice/session-1.scope/memory.max", "max\n");
  ASSERT_OK_AND_ASSIGN(CgroupPaths paths,
                       FindCgroup((root_ / "cgroup").string(), "self",
                                  (root_ / "proc").string()));
  EXPECT_EQ(paths.version, 2);
  EXPECT_EQ(paths.memory_dir, (root_ / "cgroup/user.slice/session-1.scope").string());
}

TEST_F(JobSamplerTest, MissingJobIsRefusedNamingIt) {
  JobOptions o = Options();
  EXPECT_THAT(JobSampler::Create(o, t0_), StatusIs(absl::StatusCode::kInvalidArgument));
  o.pid = 4242;
  EXPECT_THAT(JobSampler::Create(o, t0_),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("--pid 4242")));
  o.pid = 0;
  o.cgroup = "/nope";
  Write("cgroup/cgroup.controllers", "cpu\n");
  EXPECT_THAT(JobSampler::Create(o, t0_),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("cgroup /nope")));
}

TEST_F(JobSamplerTest, GpuMemoryOfTheJobsProcessesOnly) {
  setenv("FAKE_NVML_PROCESSES", "101:1024,200:4096,102:512", 1);
  ASSERT_OK_AND_ASSIGN(auto nvml, Nvml::Load(FAKE_NVML_PATH));
  JobOptions o = Options();
  o.pid = 100;
  ASSERT_OK_AND_ASSIGN(auto sampler, JobSampler::Create(o, t0_));
  std::map<std::string, double> v =
      Take(*sampler, t0_ + std::chrono::seconds(1), nvml.get());
  EXPECT_DOUBLE_EQ(v["process_gpu_memory/GPU-00000000-0000-0000-0000-000000000000"],
                   1536.0 * (1 << 20));
  EXPECT_DOUBLE_EQ(v["process_gpu_memory/GPU-00000000-0000-0000-0000-000000000001"],
                   2 * 1536.0 * (1 << 20));
  // More processes than NVML's first answer holds: asked again with room.
  std::string many;
  for (int pid = 1000; pid < 1100; ++pid) absl::StrAppend(&many, pid, ":1,");
  setenv("FAKE_NVML_PROCESSES", (many + "101:1").c_str(), 1);
  v = Take(*sampler, t0_ + std::chrono::seconds(2), nvml.get());
  EXPECT_DOUBLE_EQ(v["process_gpu_memory/GPU-00000000-0000-0000-0000-000000000000"],
                   1 << 20);
  // A GPU that cannot say: no series, one note.
  setenv("FAKE_NVML_UNSUPPORTED", "nvmlDeviceGetComputeRunningProcesses_v3", 1);
  v = Take(*sampler, t0_ + std::chrono::seconds(3), nvml.get());
  EXPECT_EQ(v.count("process_gpu_memory/GPU-00000000-0000-0000-0000-000000000000"), 0u);
  EXPECT_THAT(nvml->TakeNotes(),
              testing::ElementsAre(HasSubstr("process_gpu_memory is not supported"),
                                   HasSubstr("process_gpu_memory is not supported")));
  unsetenv("FAKE_NVML_UNSUPPORTED");
  unsetenv("FAKE_NVML_PROCESSES");
}

}  // namespace
}  // namespace metrics::client

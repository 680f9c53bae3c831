#include "tests/testing/realistic_batch.h"

#include "absl/strings/str_cat.h"

namespace metrics::test_util {

void DeclareRealisticSeries(v1::SystemMetricsBatch& batch,
                            absl::string_view gpu_prefix) {
  for (const char* name :
       {"cpu_util_simple", "memory_free", "disk_iops", "disk_throughput_read",
        "disk_throughput_write", "net_throughput_sent", "net_throughput_recv",
        "load_avg", "open_files"}) {
    v1::SeriesDeclaration* s = batch.add_series();
    s->set_name(name);
    s->set_unit("x");
  }
  for (int g = 0; g < kRealisticGpus; ++g) {
    for (const char* name : {"gpu_util", "gpu_free_memory"}) {
      v1::SeriesDeclaration* s = batch.add_series();
      s->set_name(name);
      s->set_gpu_uuid(absl::StrCat("GPU-", gpu_prefix, g));
      s->set_unit("x");
    }
  }
}

void AddRealisticReport(v1::SystemMetricsBatch& batch, absl::Time t,
                        int64_t seed) {
  v1::SystemMetricsReport* report = batch.add_reports();
  const int64_t micros = absl::ToUnixMicros(t);
  report->mutable_time()->set_seconds(micros / 1000000);
  report->mutable_time()->set_nanos(
      static_cast<int32_t>(micros % 1000000) * 1000);
  // Every declared series in order, so without indexes, as the client
  // library sends such a report.
  for (int v = 0; v < batch.series_size(); ++v) {
    report->add_values(
        static_cast<double>((seed * 7919 + v * 104729) % 100000) / 7);
  }
}

}  // namespace metrics::test_util

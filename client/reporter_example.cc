// The client library example of docs/clients.md: reports a made-up GPU utilisation
// for trial 1 ten times a second for three seconds, then shuts down and
// prints what happened. Run it against `./run.sh` after creating trial 1.
#include <cmath>
#include <cstdlib>
#include <iostream>

#include "absl/time/clock.h"
#include "client/reporter.h"

int main() {
  metrics::client::ReporterOptions options;
  options.server_address = "127.0.0.1:8081";
  options.trial_id = 1;
  options.agent_id = "example-host";
  // An API token that may write trial 1 (run.sh's admin token will do).
  if (const char* token = std::getenv("METRICS_TOKEN")) options.token = token;
  auto reporter = metrics::client::Reporter::Create(options);
  if (!reporter.ok()) {
    std::cerr << reporter.status() << "\n";
    return 1;
  }
  for (int i = 0; i < 30; ++i) {
    const double utilization = 50 + 40 * std::sin(i / 5.0);
    absl::Status recorded = (*reporter)->Record(
        absl::Now(), {{"gpu_util", utilization, "percent", "GPU-example-0"},
                      {"tokens_per_second", 1200.0 + i, "tokens/s"}});
    if (!recorded.ok()) std::cerr << recorded << "\n";  // e.g. trial ended
    absl::SleepFor(absl::Milliseconds(100));
  }
  // Sends what is left; says how many samples could not be sent, if any.
  absl::Status shutdown = (*reporter)->Shutdown(absl::Now() + absl::Seconds(5));
  const metrics::client::ReporterStats stats = (*reporter)->stats();
  std::cout << stats.acknowledged << " of " << stats.recorded
            << " samples stored\n";
  if (!shutdown.ok()) std::cerr << shutdown << "\n";
  return shutdown.ok() ? 0 : 1;
}

// The progress line of a long metricsctl job (rollup rebuild, retention,
// legacy move) on stderr: redrawn in place on a terminal; elsewhere (a log
// of a cron job) written as a new line at most every 2 s, and always for
// the job's last step, so the log stays short and ends with where it got.
//
// Thread-safety: thread-compatible; the job's progress callback owns it.
#ifndef METRICS_CTL_PROGRESS_LINE_H_
#define METRICS_CTL_PROGRESS_LINE_H_

#include <string>

#include "absl/time/time.h"

namespace metrics::ctl {

class ProgressLine {
 public:
  // The clock starts now.
  ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  // Shows `line`; `last`: the job's final step, always written.
  void Show(const std::string& line, bool last);

  // On a terminal, ends the line Show drew, before the job's summary.
  void Finish();

  // Seconds since the clock started.
  double Seconds() const;

 private:
  const bool tty_;
  const absl::Time start_;
  absl::Time last_written_ = absl::InfinitePast();
  bool drawn_ = false;
};

}  // namespace metrics::ctl

#endif  // METRICS_CTL_PROGRESS_LINE_H_

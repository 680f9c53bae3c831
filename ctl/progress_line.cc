#include "ctl/progress_line.h"

#include <unistd.h>

#include <iostream>

#include "absl/time/clock.h"

namespace metrics::ctl {

ProgressLine::ProgressLine()
    : tty_(::isatty(STDERR_FILENO) != 0), start_(absl::Now()) {}

void ProgressLine::Finish() {
  if (tty_ && drawn_) std::cerr << "\n";
  drawn_ = false;
}

void ProgressLine::Show(const std::string& line, bool last) {
  const absl::Time now = absl::Now();
  if (tty_) {
    std::cerr << "\r" << line << "\x1b[K" << std::flush;
    drawn_ = true;
  } else if (last || now - last_written_ > absl::Seconds(2)) {
    last_written_ = now;
    std::cerr << line << "\n";
  }
}

double ProgressLine::Seconds() const {
  return absl::ToDoubleSeconds(absl::Now() - start_);
}

}  // namespace metrics::ctl

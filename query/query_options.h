// QueryEngine's options (query_engine.h), apart so that what sets them
// (server_options.h) does not parse the store's interfaces.
//
// Thread-safety: a plain value.
#ifndef METRICS_QUERY_QUERY_OPTIONS_H_
#define METRICS_QUERY_QUERY_OPTIONS_H_

#include <cstdint>

namespace metrics::query {

struct QueryOptions {
  int default_max_points = 1000;
  int max_max_points = 10000;
  // A window finer than the finest rollup is answered from raw rows when an
  // agent has at most this many reports in it (at 1 Hz, 20 000 s), else
  // from the finest rollup: coarser than asked, still exact, and the
  // query's memory stays bounded however dense the data.
  int64_t max_raw_reports_per_agent = 20000;
  // Threads that read the second half of a many-agent summary meanwhile
  // (0: every read on the calling thread). A read finding none free runs
  // on the caller.
  int side_read_threads = 2;
};

}  // namespace metrics::query

#endif  // METRICS_QUERY_QUERY_OPTIONS_H_

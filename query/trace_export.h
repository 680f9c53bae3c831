// The Chrome Trace Event form of a chart answer, for Perfetto and
// chrome://tracing, made to lie beside a torch.profiler (Kineto) trace:
//   - one process per agent, "system metrics: <agent>", with a sort index
//     after the profiler's processes; its pid is kTracePidBase + the agent's
//     place (agents by id), far above any OS pid (Linux's pid_max is at most
//     2^22) and the small device indexes Kineto uses as GPU pids;
//   - one counter track per series ("ph":"C", named "<name> (<unit>)",
//     GPU series "<name> (<unit>) GPU <index> <uuid>"), one event per bucket
//     at its start with args {"mean","min","max"}, or per raw sample with
//     args {"value"};
//   - "ts" in microseconds from `base_time_ns` (nanoseconds since the
//     epoch; 0: from the epoch), which the file echoes as its top-level
//     "baseTimeNanoseconds", as PyTorch writes it; so a trace made with a
//     torch trace's base lines up with it at zero offset.
// Written in chunks of about `chunk_bytes`.
//
// Thread-safety: a pure function.
#ifndef METRICS_QUERY_TRACE_EXPORT_H_
#define METRICS_QUERY_TRACE_EXPORT_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "query/query_engine.h"

namespace metrics::query {

inline constexpr int64_t kTracePidBase = 1000000000;

absl::Status WriteTrace(const QueryResult& result, int32_t trial_id, int64_t base_time_ns,
                        size_t chunk_bytes,
                        const std::function<absl::Status(std::string chunk)>& emit);

}  // namespace metrics::query

#endif  // METRICS_QUERY_TRACE_EXPORT_H_

// The process-wide metrics exporter (docs/metrics.md): every engine of the process enrolls; the
// first whose configuration sets metrics.listen starts one HTTP endpoint that serves all of
// them at /metrics, and it stops when the last engine that asked for it withdraws.
#pragma once

#include <orbite/status.h>

#include <string>

namespace orbite::detail {

struct EngineCore;

namespace metrics_export {

// An engine whose threads started joins the process's metrics (and gets its metrics_index).
// With metrics.listen set it starts the endpoint, or shares the one running when that was
// asked for at the same address; a different address is a Configuration error, and an endpoint
// that cannot start is Unavailable. On an error the engine is not enrolled.
Status enroll(EngineCore& core);
// Before the engine's threads stop (a no-op for an engine that is not enrolled).
void withdraw(EngineCore& core);
// host:port the endpoint listens on; "" when none runs.
std::string endpoint();
// Every enrolled engine's metrics, as the endpoint serves them.
std::string process_metrics();

}  // namespace metrics_export
}  // namespace orbite::detail

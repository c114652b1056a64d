// The process-wide half of the state report (docs/hangs.md): the engines of this process, the
// SIGUSR1 handler that asks for a report, and the monitor threads that answer it. A signal
// handler may do almost nothing: it counts the request and writes one byte to an eventfd that
// every engine's monitor polls; the first monitor to see it writes the whole process's report.
#pragma once

#include <string>

namespace orbite::detail {

struct EngineCore;

namespace state_report {

// An engine whose threads started: its report joins the process's, and (once, when its
// configuration asks for it and SIGUSR1's action is the default) the handler is installed.
void enroll(EngineCore& core);
// Before the engine's threads stop: it leaves the process's report.
void withdraw(EngineCore& core);
// The eventfd a monitor polls for requests (-1 before the first enroll).
int request_fd();
// Called by a monitor whenever it wakes: writes the report when one was asked for since the
// last (to diagnostics.dump_dir of the oldest engine, or stderr). Cheap when none was.
void serve_requests();
// The report of every engine of the process, as serve_requests writes it.
std::string process_report();

}  // namespace state_report
}  // namespace orbite::detail

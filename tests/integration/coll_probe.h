// What orbite-coll-probe's files share (coll_probe.cpp: the matrix and the other scenarios, and
// main; coll_probe_route.cpp: the scenarios that check which way the bytes went).
#pragma once

#include <orbite/communicator.h>

#include <string>

#include "p2p_probe.h"

namespace orbite::probe {

// Starts a collective and waits for it; any failure ends the probe with its message.
inline void run(Result<Request> r, const std::string& what) {
  Request req = accepted(std::move(r), what);
  wait_ok(req, what);
}

// coll_probe_route.cpp.
void scenario_route(Context& c);
void scenario_hierarchical_route(Context& c);
void scenario_segment_held(Context& c);

}  // namespace orbite::probe

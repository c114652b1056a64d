// The parts of orbite._core, each added to the module by its own file.
#pragma once

#include <orbite/bootstrap.h>
#include <orbite/config.h>
#include <pybind11/pybind11.h>

#include <optional>

namespace orbite::python {

// store.cpp: Store, TcpStore, TcpStoreServer, InProcessStore, Bootstrap.
void add_store(pybind11::module_& m);
// communicator.cpp: Communicator.
void add_communicator(pybind11::module_& m);
// engine.cpp: TransferEngine, MemoryRegion, RemoteRegion.
void add_engine(pybind11::module_& m);
// cuda.cpp: the submodule cuda (DeviceBuffer, PinnedBuffer, device_count).
void add_cuda(pybind11::module_& m);

// The process's bootstrap from the environment, made once: every communicator made without one
// shares it, so that their setups are numbered in one sequence (as the ranks make them).
Bootstrap default_bootstrap();

// None: nullopt (the environment's configuration, EngineConfig::load()); a dict or a JSON string
// of OrbiTE's configuration file format; anything else, or a bad configuration, raises.
std::optional<EngineConfig> config_of(pybind11::handle config);

}  // namespace orbite::python

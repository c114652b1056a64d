// Another process's device allocation, mapped into this one through its legacy IPC handle
// (Allocation::export_ipc on the owner's side). No CUDA header is needed to use this one.
#pragma once

#include <orbite/status.h>

#include <cstdint>
#include <memory>

#include "cuda/allocation.h"

namespace orbite::cuda {

class PeerMapping {
 public:
  // Opens `handle` in device `ordinal`'s primary context (retained while mapped), with peer
  // access enabled lazily so that an allocation on another device of this host opens too. The
  // driver refuses a handle this process exported.
  static Result<std::unique_ptr<PeerMapping>> open(const IpcHandle& handle, int ordinal);
  // Closes it if close() was not called; a failure is retained (retained_resources()).
  ~PeerMapping();
  PeerMapping(const PeerMapping&) = delete;
  PeerMapping& operator=(const PeerMapping&) = delete;

  // The device address of the peer allocation's first byte, in `ordinal`'s context.
  [[nodiscard]] std::uint64_t address() const { return address_; }
  [[nodiscard]] int ordinal() const { return ordinal_; }
  // Unmaps, once no copy uses it (the caller knows). A failure keeps the mapping and its
  // context for the rest of the process (retained) and is returned; a second call does nothing.
  Status close();

  struct Context;  // the retained context (CUDA types, ipc.cpp)

 private:
  PeerMapping(std::unique_ptr<Context> ctx, std::uint64_t address, int ordinal);
  std::unique_ptr<Context> ctx_;
  std::uint64_t address_ = 0;
  int ordinal_ = 0;
  bool closed_ = false;
};

}  // namespace orbite::cuda

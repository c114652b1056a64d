// The cuda_ipc transport's messages. They travel as TransportControl frames on the peer's control
// connection (header field b: IpcKind); every body is decoded in full and checked before use.
//
//   requester                                   owner
//   IpcAccess{token, region, gen, off, len, w} ->  authorize (rights, generation, bounds),
//                                                  the producer's readiness, first use by this
//                                                  peer: a mapping pin on the registration
//                <- IpcGrant{token, ok, handle, offset of the range in the allocation}
//   maps the handle (cached), copies on its stream, completes on the event
//                <- IpcUnmap{region}               the registration is being unregistered
//   drains its copies, closes the mapping
//   IpcUnmapped{region, status}               ->  drops the mapping pin
#pragma once

#include <orbite/status.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "cuda/allocation.h"

namespace orbite::p2p::ipc {

// The connect blob's version and the region descriptor part's; an engine refuses any other.
inline constexpr std::uint8_t kIpcWireVersion = 1;

enum class IpcKind : std::uint8_t { Access = 1, Grant = 2, Unmap = 3, Unmapped = 4 };
const char* kind_name(std::uint64_t kind);

struct IpcAccess {
  std::uint64_t token = 0;  // the requester's, echoed in the grant
  std::uint64_t region = 0;
  std::uint64_t generation = 0;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  bool write = false;  // put
};

struct IpcGrant {
  std::uint64_t token = 0;
  std::uint32_t errc = 0;  // Errc; nonzero: refused, with `reason`
  std::string reason;
  std::uint64_t region = 0;        // the registration this mapping belongs to
  cuda::IpcHandle handle;          // of the allocation behind it
  std::uint64_t alloc_offset = 0;  // the range's first byte in that allocation
};

struct IpcUnmap {
  std::uint64_t region = 0;
};

struct IpcUnmapped {
  std::uint64_t region = 0;
  std::uint32_t errc = 0;  // nonzero: a mapping could not be closed (it stays, retained)
  std::string reason;
};

std::string encode(const IpcAccess& m);
std::string encode(const IpcGrant& m);
std::string encode(const IpcUnmap& m);
std::string encode(const IpcUnmapped& m);
Result<IpcAccess> decode_access(std::string_view body);
Result<IpcGrant> decode_grant(std::string_view body);
Result<IpcUnmap> decode_unmap(std::string_view body);
Result<IpcUnmapped> decode_unmapped(std::string_view body);

// The connect blob: the version and this process's id.
std::string encode_blob(std::uint64_t pid);
Result<std::uint64_t> decode_blob(std::string_view blob);

}  // namespace orbite::p2p::ipc

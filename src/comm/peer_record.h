// The record each rank publishes in the bootstrap store when a communicator is created.
// Versioned; every field is bounded and checked when decoded.
#pragma once

#include <orbite/communicator.h>
#include <orbite/status.h>

#include <string>
#include <string_view>

namespace orbite::comm {

std::string encode_peer_record(const PeerInfo& peer);
// `expected_rank` is the rank whose key held the record; a mismatch is a Protocol error.
Result<PeerInfo> decode_peer_record(std::string_view bytes, int expected_rank);

}  // namespace orbite::comm

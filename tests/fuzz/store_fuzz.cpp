// Fuzz target: what the store server reads from a connection (bootstrap/store_protocol.h): the
// frame header against its payload bound, then a request body of the header's op. The first
// byte picks the op; the rest is the payload (a header when the op byte is 0). An accepted
// request must re-encode to a frame whose header and body decode to the same encoding again.
#include <string_view>

#include "bootstrap/store_protocol.h"
#include "fuzz_target.h"

namespace orbite::fuzz {
namespace {

namespace sp = store_protocol;

bool run_one(std::uint8_t op, std::string_view payload) {
  if (op == 0) return sp::decode_header(payload, sp::kMaxHelloPayload).ok();
  const auto req = sp::decode_request(op, payload);
  if (!req.ok()) return false;
  const std::string frame = sp::encode_request(7, *req);
  const auto h = sp::decode_header(frame, frame.size());
  require(h.ok() && h->op == op, "store header of a re-encoded request");
  const auto again = sp::decode_request(op, std::string_view(frame).substr(sp::kHeaderBytes));
  require(again.ok() && sp::encode_request(7, *again) == frame, "store request round trip");
  return true;
}

std::string with_op(sp::Op op, const sp::Request& r) {
  const std::string frame = sp::encode_request(1, r);
  return std::string(1, static_cast<char>(op)) + frame.substr(sp::kHeaderBytes);
}

}  // namespace

std::vector<std::string> seeds() {
  std::vector<std::string> out;
  sp::Request r;
  r.op = sp::Op::Hello;
  r.value = "token-0123";
  out.push_back(with_op(sp::Op::Hello, r));
  r = {};
  r.op = sp::Op::Set;
  r.key = "rank/0";
  r.value = std::string(64, 'v');
  out.push_back(with_op(sp::Op::Set, r));
  r = {};
  r.op = sp::Op::Get;
  r.key = "rank/1";
  r.timeout_ms = 1000;
  out.push_back(with_op(sp::Op::Get, r));
  r = {};
  r.op = sp::Op::Wait;
  r.keys = {"a", "b", "c"};
  r.timeout_ms = 5;
  out.push_back(with_op(sp::Op::Wait, r));
  r = {};
  r.op = sp::Op::Add;
  r.key = "counter";
  r.delta = -3;
  out.push_back(with_op(sp::Op::Add, r));
  r = {};
  r.op = sp::Op::CompareSet;
  r.key = "k";
  r.value = "old";
  r.desired = "new";
  out.push_back(with_op(sp::Op::CompareSet, r));
  std::string header;
  sp::encode_header(header, sp::Header{sp::kVersion, 2, 0, 9, 16});
  out.push_back(std::string(1, '\0') + header);
  return out;
}

bool accepts(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return false;
  return run_one(data[0], std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1));
}

}  // namespace orbite::fuzz

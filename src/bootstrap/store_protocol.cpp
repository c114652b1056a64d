#include "bootstrap/store_protocol.h"

#include "common/strings.h"
#include "common/wire.h"

namespace orbite::store_protocol {

void encode_header(std::string& out, const Header& h) {
  wire::Writer w(out);
  w.put<std::uint32_t>(kMagic);
  w.put<std::uint8_t>(h.version);
  w.put<std::uint8_t>(h.op);
  w.put<std::uint16_t>(h.flags);
  w.put<std::uint32_t>(h.request_id);
  w.put<std::uint32_t>(h.payload_len);
}

Result<Header> decode_header(std::string_view bytes, size_t max_payload) {
  wire::Reader r(bytes.substr(0, kHeaderBytes));
  auto magic = r.get<std::uint32_t>();
  Header h;
  h.version = r.get<std::uint8_t>();
  h.op = r.get<std::uint8_t>();
  h.flags = r.get<std::uint16_t>();
  h.request_id = r.get<std::uint32_t>();
  h.payload_len = r.get<std::uint32_t>();
  if (!r.ok()) return Status::error(Errc::Protocol, "frame header truncated");
  if (magic != kMagic) {
    return Status::error(
        Errc::Protocol, "bad frame magic 0x" + [&] {
          char buf[16];
          std::snprintf(buf, sizeof(buf), "%08x", magic);
          return std::string(buf);
        }());
  }
  if (h.version != kVersion) {
    return Status::error(Errc::Protocol, "unsupported protocol version " +
                                             std::to_string(h.version) + " (expected " +
                                             std::to_string(kVersion) + ")");
  }
  if (h.flags != 0) {
    return Status::error(Errc::Protocol, "reserved flags field is " + std::to_string(h.flags));
  }
  if (h.payload_len > max_payload) {
    return Status::error(Errc::Protocol, "frame payload of " + std::to_string(h.payload_len) +
                                             " bytes exceeds the limit of " +
                                             std::to_string(max_payload));
  }
  return h;
}

bool is_request_op(std::uint8_t op) {
  return op >= static_cast<std::uint8_t>(Op::Hello) && op <= static_cast<std::uint8_t>(Op::Erase);
}

std::string_view op_name(std::uint8_t op) {
  switch (static_cast<Op>(op & ~kReplyBit)) {
    case Op::Hello: return "hello";
    case Op::Set: return "set";
    case Op::Get: return "get";
    case Op::Wait: return "wait";
    case Op::Check: return "check";
    case Op::Add: return "add";
    case Op::CompareSet: return "compare_set";
    case Op::Erase: return "erase";
  }
  return "unknown";
}

namespace {

std::string frame(std::uint32_t request_id, std::uint8_t op, const std::string& payload) {
  std::string out;
  out.reserve(kHeaderBytes + payload.size());
  Header h;
  h.op = op;
  h.request_id = request_id;
  h.payload_len = static_cast<std::uint32_t>(payload.size());
  encode_header(out, h);
  out += payload;
  return out;
}

void put_keys(wire::Writer& w, const std::vector<std::string>& keys) {
  w.put<std::uint32_t>(static_cast<std::uint32_t>(keys.size()));
  for (const auto& k : keys) w.put_bytes(k);
}

}  // namespace

std::string encode_request(std::uint32_t request_id, const Request& req) {
  std::string out;
  encode_request_into(out, request_id, req);
  return out;
}

void encode_request_into(std::string& out, std::uint32_t request_id, const Request& req) {
  out.clear();
  Header h;
  h.op = static_cast<std::uint8_t>(req.op);
  h.request_id = request_id;
  encode_header(out, h);  // payload_len patched below
  wire::Writer w(out);
  switch (req.op) {
    case Op::Hello: w.put_bytes(req.value); break;
    case Op::Set:
      w.put_bytes(req.key);
      w.put_bytes(req.value);
      break;
    case Op::Get:
      w.put_bytes(req.key);
      w.put<std::uint64_t>(req.timeout_ms);
      break;
    case Op::Wait:
      put_keys(w, req.keys);
      w.put<std::uint64_t>(req.timeout_ms);
      break;
    case Op::Check: put_keys(w, req.keys); break;
    case Op::Add:
      w.put_bytes(req.key);
      w.put<std::int64_t>(req.delta);
      break;
    case Op::CompareSet:
      w.put_bytes(req.key);
      w.put_bytes(req.value);
      w.put_bytes(req.desired);
      break;
    case Op::Erase: w.put_bytes(req.key); break;
  }
  w.patch_u32(12, static_cast<std::uint32_t>(out.size() - kHeaderBytes));
}

Result<Request> decode_request(std::uint8_t op, std::string_view payload) {
  if (!is_request_op(op)) {
    return Status::error(Errc::Protocol, "unknown request op " + std::to_string(op));
  }
  Request req;
  req.op = static_cast<Op>(op);
  wire::Reader r(payload);
  auto get_key = [&r]() { return std::string(r.get_bytes(kMaxKeyBytes)); };
  auto get_keys = [&]() {
    auto n = r.get<std::uint32_t>();
    if (n > kMaxKeysPerRequest) {
      r.fail();
      return;
    }
    for (std::uint32_t i = 0; i < n && r.ok(); ++i) req.keys.push_back(get_key());
  };
  switch (req.op) {
    case Op::Hello: req.value = std::string(r.get_bytes(kMaxKeyBytes)); break;
    case Op::Set:
      req.key = get_key();
      req.value = std::string(r.get_bytes(payload.size()));
      break;
    case Op::Get:
      req.key = get_key();
      req.timeout_ms = r.get<std::uint64_t>();
      break;
    case Op::Wait:
      get_keys();
      req.timeout_ms = r.get<std::uint64_t>();
      break;
    case Op::Check: get_keys(); break;
    case Op::Add:
      req.key = get_key();
      req.delta = r.get<std::int64_t>();
      break;
    case Op::CompareSet:
      req.key = get_key();
      req.value = std::string(r.get_bytes(payload.size()));
      req.desired = std::string(r.get_bytes(payload.size()));
      break;
    case Op::Erase: req.key = get_key(); break;
  }
  if (!r.done()) {
    return Status::error(Errc::Protocol, std::string("malformed ") + std::string(op_name(op)) +
                                             " request (" + std::to_string(payload.size()) +
                                             " payload bytes; a field is truncated, too long or "
                                             "followed by extra bytes)");
  }
  return req;
}

std::string encode_error_reply(std::uint32_t request_id, std::uint8_t op, Errc code,
                               std::string_view message) {
  std::string payload;
  wire::Writer w(payload);
  w.put<std::uint8_t>(static_cast<std::uint8_t>(code));
  w.put_bytes(message);
  return frame(request_id, static_cast<std::uint8_t>(op | kReplyBit), payload);
}

std::string encode_ok_reply(std::uint32_t request_id, std::uint8_t op, std::string_view result) {
  std::string payload;
  payload.reserve(1 + result.size());
  wire::Writer w(payload);
  w.put<std::uint8_t>(0);
  payload.append(result);
  return frame(request_id, static_cast<std::uint8_t>(op | kReplyBit), payload);
}

}  // namespace orbite::store_protocol

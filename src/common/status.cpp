#include <orbite/status.h>

#include <cstdio>
#include <cstdlib>

namespace orbite {

std::string_view errc_name(Errc code) noexcept {
  switch (code) {
    case Errc::Ok: return "OK";
    case Errc::InvalidArgument: return "InvalidArgument";
    case Errc::Configuration: return "Configuration";
    case Errc::Unavailable: return "Unavailable";
    case Errc::ResourceExhausted: return "ResourceExhausted";
    case Errc::Timeout: return "Timeout";
    case Errc::Unquiesced: return "Unquiesced";
    case Errc::ConnectionLost: return "ConnectionLost";
    case Errc::Cancelled: return "Cancelled";
    case Errc::NotFound: return "NotFound";
    case Errc::PermissionDenied: return "PermissionDenied";
    case Errc::Protocol: return "Protocol";
    case Errc::Internal: return "Internal";
  }
  return "Unknown";
}

Status Status::error(Errc code, std::string message, std::source_location where) {
  Status s;
  s.code_ = code;
  s.message_ = std::move(message);
  s.file_ = where.file_name();
  s.line_ = where.line();
  return s;
}

std::string Status::to_string() const {
  if (ok()) return "OK";
  std::string out(errc_name(code_));
  out += ": ";
  out += message_;
  return out;
}

Status Status::with_context(std::string_view context) const {
  if (ok()) return *this;
  Status s = *this;
  s.message_ = std::string(context) + ": " + message_;
  return s;
}

namespace detail {
void abort_on_bad_result_access(const Status& status) {
  std::fprintf(stderr, "orbite: value() of an error Result: %s (%s:%u)\n",
               status.to_string().c_str(), status.file(), status.line());
  std::abort();
}
}  // namespace detail

}  // namespace orbite

// Status and Result<T>: how every fallible OrbiTE call reports failure. No exception crosses the
// public API; a Status carries an error class (Errc), a message that names the field or object and
// the offending value, and the source location where the error was decided.
#pragma once

#include <orbite/export.h>

#include <cstddef>
#include <cstdint>
#include <source_location>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

namespace orbite {

// Error classes, ordered roughly by what the caller must do about them.
enum class Errc : std::uint8_t {
  Ok = 0,
  InvalidArgument,    // The caller passed something wrong; nothing changed.
  Configuration,      // A configuration value or combination is invalid.
  Unavailable,        // A feature, library, device or route is not present or not usable.
  ResourceExhausted,  // A bounded budget (connections, grants, memory, table) is full.
  Timeout,            // A bounded wait ran out; the operation did not complete.
  Unquiesced,         // Physical completion or destruction is unproven; owners are retained.
  ConnectionLost,     // A peer or server went away.
  Cancelled,          // The operation was cancelled before it completed.
  NotFound,           // A named object (key, device, peer) does not exist.
  PermissionDenied,   // Authentication or access rights refused the operation.
  Protocol,           // A peer sent a malformed or unexpected message.
  Internal,           // A broken invariant inside OrbiTE: a bug.
};
// The number of Errc values (Ok included): the size of a table indexed by code.
inline constexpr std::size_t kErrcCount = static_cast<std::size_t>(Errc::Internal) + 1;

// Stable, human-readable name of an error class ("InvalidArgument", ...).
ORBITE_API std::string_view errc_name(Errc code) noexcept;

class [[nodiscard, gnu::visibility("default")]] Status {
 public:
  Status() noexcept = default;  // OK

  static Status error(Errc code, std::string message,
                      std::source_location where = std::source_location::current());

  [[nodiscard]] bool ok() const noexcept {
    return code_ == Errc::Ok;
  }
  [[nodiscard]] Errc code() const noexcept {
    return code_;
  }
  [[nodiscard]] const std::string& message() const noexcept {
    return message_;
  }
  [[nodiscard]] const char* file() const noexcept {
    return file_;
  }
  [[nodiscard]] std::uint32_t line() const noexcept {
    return line_;
  }

  // "Timeout: store wait for key 'x' timed out after 3000 ms"; "OK" for success.
  [[nodiscard]] std::string to_string() const;

  // Returns a copy whose message is prefixed with "context: ", keeping code and location.
  [[nodiscard]] Status with_context(std::string_view context) const;

  // Marks a status as deliberately ignored (for best-effort cleanup paths).
  void ignore() const noexcept {}

 private:
  Errc code_ = Errc::Ok;
  std::uint32_t line_ = 0;
  const char* file_ = "";
  std::string message_;
};

inline Status ok_status() noexcept {
  return Status();
}

// A value or an error Status. Accessing the value of an error Result is a programming error and
// aborts with the status text.
template <class T>
class [[nodiscard]] Result {
  static_assert(!std::is_reference_v<T>, "Result<T&> is not supported");
  static_assert(!std::is_same_v<std::remove_cv_t<T>, Status>, "use Status directly");

 public:
  Result(const T& value) : data_(value) {}        // NOLINT(google-explicit-constructor)
  Result(T&& value) : data_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : data_(std::move(status)) { check_error(); }  // NOLINT

  [[nodiscard]] bool ok() const noexcept { return std::holds_alternative<T>(data_); }
  explicit operator bool() const noexcept { return ok(); }

  [[nodiscard]] const Status& status() const noexcept {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(data_);
  }

  [[nodiscard]] T& value() & { return checked(); }
  [[nodiscard]] const T& value() const& { return const_cast<Result*>(this)->checked(); }
  [[nodiscard]] T&& value() && { return std::move(checked()); }

  T& operator*() & { return checked(); }
  const T& operator*() const& { return const_cast<Result*>(this)->checked(); }
  T* operator->() { return &checked(); }
  const T* operator->() const { return &const_cast<Result*>(this)->checked(); }

  template <class U>
  [[nodiscard]] T value_or(U&& fallback) const& {
    return ok() ? std::get<T>(data_) : static_cast<T>(std::forward<U>(fallback));
  }

 private:
  T& checked() {
    if (!ok()) detail_abort(std::get<Status>(data_));
    return std::get<T>(data_);
  }
  void check_error() {
    if (std::get<Status>(data_).ok()) {
      data_ = Status::error(Errc::Internal, "Result constructed from an OK status without a value");
    }
  }
  [[noreturn]] static void detail_abort(const Status& s);

  std::variant<T, Status> data_;
};

namespace detail {
[[noreturn]] ORBITE_API void abort_on_bad_result_access(const Status& status);
}

template <class T>
void Result<T>::detail_abort(const Status& s) {
  detail::abort_on_bad_result_access(s);
}

}  // namespace orbite

// Propagation helpers. They evaluate the expression once.
#define ORBITE_RETURN_IF_ERROR(expr)                         \
  do {                                                       \
    ::orbite::Status orbite_status_tmp_ = (expr);            \
    if (!orbite_status_tmp_.ok()) return orbite_status_tmp_; \
  } while (false)

#define ORBITE_CONCAT_INNER_(a, b) a##b
#define ORBITE_CONCAT_(a, b) ORBITE_CONCAT_INNER_(a, b)
#define ORBITE_ASSIGN_OR_RETURN(lhs, expr) \
  ORBITE_ASSIGN_OR_RETURN_IMPL_(ORBITE_CONCAT_(orbite_result_tmp_, __LINE__), lhs, expr)
#define ORBITE_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()

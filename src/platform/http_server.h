// A small HTTP server for the metrics exporter: civetweb (libcivetweb.so.1, Debian's
// libcivetweb1), loaded at run time like the verbs and CUDA libraries, so that liborbite links
// no HTTP library and a machine without it only loses the exporter (Errc::Unavailable).
// This header needs no civetweb.h.
#pragma once

#include <orbite/status.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace orbite::platform {

// One response body and its Content-Type.
struct HttpBody {
  std::string content_type;
  std::string text;
};

class HttpServer {
 public:
  // Called on one of the server's threads for every GET (or HEAD) of the path; may run
  // concurrently with itself when clients overlap.
  using Handler = std::function<HttpBody()>;

  // Listens on host:port (a numeric IPv4 or IPv6 address; port 0 takes a free one) and answers
  // GET `path` with the handler's body; other paths are 404, other methods 405. Unavailable when
  // civetweb cannot be loaded or the address cannot be bound (the reason names both).
  static Result<std::unique_ptr<HttpServer>> start(const std::string& host, std::uint16_t port,
                                                   std::string path, Handler handler);
  // Stops listening and joins the server's threads (a handler running now finishes first).
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // The port bound (the one asked for, or the one port 0 took).
  [[nodiscard]] std::uint16_t port() const { return port_; }
  // "host:port" as a client would name it ("[addr]:port" for IPv6).
  [[nodiscard]] const std::string& address() const { return address_; }

  struct Impl;

 private:
  HttpServer() = default;
  std::unique_ptr<Impl> impl_;
  std::uint16_t port_ = 0;
  std::string address_;
  std::string host_;  // the numeric address it listens on
};

// Whether civetweb loads here ("" when it does, else why not).
std::string http_server_unavailable_reason();

}  // namespace orbite::platform

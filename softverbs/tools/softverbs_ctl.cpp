// softverbs-ctl SOCKET COMMAND...: sends one control command to a process running on softverbs
// with SOFTVERBS_CONTROL_SOCKET=SOCKET and prints its reply. Exit status: 0 when the reply is
// "ok...", 1 when it is an error, 2 for a bad command line or an unreachable socket.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: softverbs-ctl SOCKET COMMAND [ARGS...]\n");
    return 2;
  }
  std::string line;
  for (int i = 2; i < argc; ++i) line += std::string(i > 2 ? " " : "") + argv[i];
  line.push_back('\n');
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (std::strlen(argv[1]) >= sizeof(addr.sun_path)) {
    std::fprintf(stderr, "softverbs-ctl: socket path '%s' is too long\n", argv[1]);
    return 2;
  }
  std::strcpy(addr.sun_path, argv[1]);
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    std::fprintf(stderr, "softverbs-ctl: cannot reach %s: %s\n", argv[1], std::strerror(errno));
    return 2;
  }
  if (write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
    std::fprintf(stderr, "softverbs-ctl: write to %s failed\n", argv[1]);
    return 2;
  }
  std::string reply;
  char buf[512];
  for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) reply.append(buf, static_cast<size_t>(n));
  close(fd);
  std::fputs(reply.c_str(), stdout);
  return reply.rfind("ok", 0) == 0 ? 0 : 1;
}

// Runs a block of a test with the process out of file descriptors: the soft RLIMIT_NOFILE is
// lowered to a little above the highest descriptor open, and /dev/null is opened until EMFILE.
// free_one() gives exactly one back; the destructor gives everything back and restores the limit.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <vector>

namespace orbite::testing {

class DescriptorsExhausted {
 public:
  DescriptorsExhausted() {
    EXPECT_EQ(getrlimit(RLIMIT_NOFILE, &saved_), 0);
    rlimit low = saved_;
    low.rlim_cur = std::min<rlim_t>(saved_.rlim_cur, highest_open() + 64);
    EXPECT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
    while (true) {
      const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        EXPECT_EQ(errno, EMFILE);
        break;
      }
      fillers_.push_back(fd);
    }
  }
  ~DescriptorsExhausted() { release(); }
  DescriptorsExhausted(const DescriptorsExhausted&) = delete;
  DescriptorsExhausted& operator=(const DescriptorsExhausted&) = delete;

  void free_one() {
    ASSERT_FALSE(fillers_.empty());
    ::close(fillers_.back());
    fillers_.pop_back();
  }
  void release() {
    for (int fd : fillers_) ::close(fd);
    fillers_.clear();
    setrlimit(RLIMIT_NOFILE, &saved_);
  }

 private:
  static rlim_t highest_open() {
    rlim_t highest = 2;
    for (int fd = 0; fd < 65536; ++fd) {
      if (fcntl(fd, F_GETFD) != -1) highest = static_cast<rlim_t>(fd);
    }
    return highest;
  }
  rlimit saved_{};
  std::vector<int> fillers_;
};

// A TCP connection to 127.0.0.1:port made with bare syscalls (no resolver, which may open
// files): -1 with errno set on failure.
inline int connect_loopback(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) {
    const int err = errno;
    ::close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

}  // namespace orbite::testing

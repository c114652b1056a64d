#include "common/shm_object.h"

#include <fcntl.h>

#include <cerrno>

namespace orbite {

int size_shm_object(int fd, std::uint64_t bytes) {
  int rc = 0;
  do {
    rc = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  } while (rc == EINTR);
  return rc;
}

}  // namespace orbite

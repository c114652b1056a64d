// Device memory the CPU cannot touch, pinned and registered host memory, managed memory and
// pointer attributes.
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "fixture.h"

namespace {

TEST_F(Softcuda, DeviceMemoryIsNotCpuMemory) {
  CUdeviceptr p = 0;
  CU_OK(cuMemAlloc(&p, 1 << 16));
  std::vector<char> host(1 << 16, 'x');
  CU_OK(cuMemcpyHtoD(p, host.data(), host.size()));
  // The kernel refuses the address to every system call that would read or write it.
  int fds[2];
  ASSERT_EQ(0, pipe(fds));
  errno = 0;
  EXPECT_EQ(-1, write(fds[1], reinterpret_cast<void*>(p), 64));
  EXPECT_EQ(EFAULT, errno);
  int pair[2];
  ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, pair));
  iovec iov{reinterpret_cast<void*>(p), 64};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  errno = 0;
  EXPECT_EQ(-1, sendmsg(pair[0], &msg, 0));
  EXPECT_EQ(EFAULT, errno);
  char local[64];
  iovec mine{local, sizeof local};
  iovec theirs{reinterpret_cast<void*>(p), sizeof local};
  errno = 0;
  EXPECT_EQ(-1, process_vm_readv(getpid(), &mine, 1, &theirs, 1, 0));
  EXPECT_EQ(EFAULT, errno);
  for (int fd : {fds[0], fds[1], pair[0], pair[1]}) close(fd);
  CU_OK(cuMemFree(p));
}

TEST_F(Softcuda, TouchingDevicePointerWithTheCpuCrashes) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  CUdeviceptr p = 0;
  CU_OK(cuMemAlloc(&p, 4096));
  auto* bytes = reinterpret_cast<volatile char*>(p);
  EXPECT_DEATH({ bytes[0] = 1; }, "");
  EXPECT_DEATH({ [[maybe_unused]] char c = bytes[100]; }, "");
  CU_OK(cuMemFree(p));
}

TEST_F(Softcuda, AllocationsAndAddressRanges) {
  CUdeviceptr small = 0, large = 0;
  CU_OK(cuMemAlloc(&small, 1000));
  CU_OK(cuMemAlloc(&large, 3u << 20));
  EXPECT_EQ(0u, small % 256);
  EXPECT_EQ(0u, large % (2u << 20));
  CUdeviceptr base = 0;
  size_t size = 0;
  CU_OK(cuMemGetAddressRange(&base, &size, large + 12345));
  EXPECT_EQ(large, base);
  EXPECT_EQ(3u << 20, size);
  CU_EXPECT(CUDA_ERROR_NOT_FOUND, cuMemGetAddressRange(&base, &size, large + (3u << 20)));
  size_t free_bytes = 0, total = 0;
  CU_OK(cuMemGetInfo(&free_bytes, &total));
  EXPECT_LT(free_bytes, total);
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemFree(small + 8));  // not a base
  CU_OK(cuMemFree(small));
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemFree(small));  // twice
  CU_OK(cuMemFree(large));
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemAlloc(&small, 0));
}

TEST_F(Softcuda, PointerAttributes) {
  CUdeviceptr d = 0;
  CU_OK(cuMemAlloc(&d, 8192));
  unsigned type = 0;
  CU_OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d + 100));
  EXPECT_EQ(CU_MEMORYTYPE_DEVICE, type);
  CUcontext c = nullptr;
  CU_OK(cuPointerGetAttribute(&c, CU_POINTER_ATTRIBUTE_CONTEXT, d));
  EXPECT_EQ(ctx_, c);
  int ordinal = -1;
  CU_OK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, d));
  EXPECT_EQ(0, ordinal);
  unsigned long long id1 = 0, id2 = 0;
  CU_OK(cuPointerGetAttribute(&id1, CU_POINTER_ATTRIBUTE_BUFFER_ID, d));
  void* host_ptr = nullptr;
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE,
            cuPointerGetAttribute(&host_ptr, CU_POINTER_ATTRIBUTE_HOST_POINTER, d));
  // Buffer IDs are never reused, even where an address is.
  CU_OK(cuMemFree(d));
  CU_OK(cuMemAlloc(&d, 8192));
  CU_OK(cuPointerGetAttribute(&id2, CU_POINTER_ATTRIBUTE_BUFFER_ID, d));
  EXPECT_NE(id1, id2);
  // SYNC_MEMOPS is settable and reads back.
  unsigned one = 1;
  CU_OK(cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, d));
  unsigned sync = 0;
  CU_OK(cuPointerGetAttribute(&sync, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, d));
  EXPECT_EQ(1u, sync);
  // A pointer the driver does not know: an error alone, defaults in the plural form.
  int pageable = 0;
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE,
            cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                  reinterpret_cast<CUdeviceptr>(&pageable)));
  CUpointer_attribute attrs[2] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                  CU_POINTER_ATTRIBUTE_IS_MANAGED};
  unsigned mt = 99;
  unsigned managed = 99;
  void* data[2] = {&mt, &managed};
  CU_OK(cuPointerGetAttributes(2, attrs, data, reinterpret_cast<CUdeviceptr>(&pageable)));
  EXPECT_EQ(0u, mt);
  CU_OK(cuMemFree(d));
}

TEST_F(Softcuda, PinnedRegisteredAndManagedMemory) {
  void* pinned = nullptr;
  CU_OK(cuMemHostAlloc(&pinned, 4096, CU_MEMHOSTALLOC_PORTABLE));
  std::memset(pinned, 1, 4096);  // the CPU may touch it
  unsigned type = 0;
  CU_OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                              reinterpret_cast<CUdeviceptr>(pinned)));
  EXPECT_EQ(CU_MEMORYTYPE_HOST, type);
  unsigned flags = 0;
  CU_OK(cuMemHostGetFlags(&flags, pinned));
  EXPECT_EQ(unsigned(CU_MEMHOSTALLOC_PORTABLE), flags);
  CU_OK(cuMemFreeHost(pinned));

  std::vector<char> mine(1 << 16);
  CU_OK(cuMemHostRegister(mine.data(), mine.size(), 0));
  CU_EXPECT(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
            cuMemHostRegister(mine.data() + 4096, 4096, 0));
  CU_OK(cuMemHostUnregister(mine.data()));
  CU_EXPECT(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, cuMemHostUnregister(mine.data()));

  CUdeviceptr managed = 0;
  CU_OK(cuMemAllocManaged(&managed, 4096, CU_MEM_ATTACH_GLOBAL));
  reinterpret_cast<char*>(managed)[0] = 5;  // managed memory is CPU-accessible
  unsigned is_managed = 0;
  CU_OK(cuPointerGetAttribute(&is_managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, managed));
  EXPECT_EQ(1u, is_managed & 0xff);
  CU_OK(cuMemFree(managed));
}

}  // namespace

// Shared by softcuda's tests: programs written against the CUDA driver API (linked with the
// toolkit's stub, run with softcuda's libcuda.so.1 on LD_LIBRARY_PATH).
#pragma once

#include <cuda.h>
#include <gtest/gtest.h>
#include <softcuda/control.h>

#include <string>

#define CU_OK(call) ASSERT_EQ(CUDA_SUCCESS, (call)) << #call
#define CU_EXPECT(expected, call) EXPECT_EQ((expected), (call)) << #call

// A primary context of device 0, current on the test's thread.
class Softcuda : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(softcuda::loaded()) << "run with softcuda's libcuda.so.1 on LD_LIBRARY_PATH";
    CU_OK(cuInit(0));
    CU_OK(cuDeviceGet(&dev_, 0));
    CU_OK(cuDevicePrimaryCtxRetain(&ctx_, dev_));
    CU_OK(cuCtxSetCurrent(ctx_));
  }
  void TearDown() override {
    softcuda::control("release");
    softcuda::control("clear");
    cuCtxSetCurrent(nullptr);
    cuDevicePrimaryCtxRelease(dev_);
  }
  // A control command that must succeed.
  static void control(const std::string& command) {
    std::string reply;
    ASSERT_EQ(0, softcuda::control(command, &reply)) << command << ": " << reply;
  }
  // A number from the statistics, e.g. "event_synchronize_calls".
  static long long stat(const std::string& key) {
    const std::string s = softcuda::stats();
    const std::string needle = "\"" + key + "\":";
    const auto at = s.find(needle);
    return at == std::string::npos ? -1 : std::stoll(s.substr(at + needle.size()));
  }
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
};

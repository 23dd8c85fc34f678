#include "exec/env_filter.h"

#include <gtest/gtest.h>

namespace yonder::exec {
namespace {

TEST(EnvFilter, RuntimeControlsAreReservedWhateverTheirCase) {
  for (const char* name : {"NVIDIA_VISIBLE_DEVICES", "nvidia_visible_devices", "NVIDIA_DRIVER_CAPABILITIES",
                           "NVIDIA_REQUIRE_CUDA", "NVIDIA_DISABLE_REQUIRE", "CUDA_VISIBLE_DEVICES", "Cuda_Visible_Devices",
                           "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "YONDER_FAKE_GPUS"}) {
    EXPECT_TRUE(is_reserved_env(name)) << name;
    auto st = check_consumer_env({{name, "all"}});
    ASSERT_FALSE(st.ok()) << name;
    EXPECT_EQ(st.error().code(), ErrorCode::kPermissionDenied);
    EXPECT_NE(st.error().message().find(name), std::string::npos) << st.error().message();
  }
}

TEST(EnvFilter, AnArrayTaskMayCarryItsIndexAndParameter) {
  EXPECT_FALSE(is_reserved_env("YONDER_ARRAY_INDEX"));
  EXPECT_TRUE(check_consumer_env({{"YONDER_ARRAY_INDEX", "7"}, {"YONDER_ARRAY_PARAM", "{\"p\": 1}"}}).ok());
  auto st = check_consumer_env({{"YONDER_JOB_ID", "x"}});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("only YONDER_ARRAY_*"), std::string::npos) << st.error().message();
}

TEST(EnvFilter, OrdinaryVariablesPass) {
  EXPECT_FALSE(is_reserved_env("CUDA_HOME"));
  EXPECT_FALSE(is_reserved_env("MY_NVIDIA_TOKEN"));
  EXPECT_TRUE(check_consumer_env({{"PYTHONUNBUFFERED", "1"}, {"HF_HOME", "/workspace/hf"}, {"_x1", ""}}).ok());
}

TEST(EnvFilter, BadNamesAndValuesAreRefused) {
  EXPECT_FALSE(check_consumer_env({{"", "x"}}).ok());
  EXPECT_FALSE(check_consumer_env({{"1ABC", "x"}}).ok());
  EXPECT_FALSE(check_consumer_env({{"A=B", "x"}}).ok());
  EXPECT_FALSE(check_consumer_env({{"A B", "x"}}).ok());
  EXPECT_FALSE(check_consumer_env({{"A", std::string("x\0y", 3)}}).ok());
  EXPECT_FALSE(check_consumer_env({{"A", std::string(kMaxEnvValueBytes + 1, 'x')}}).ok());
  std::map<std::string, std::string> many;
  for (size_t i = 0; i <= kMaxEnvVars; ++i) many["V" + std::to_string(i)] = "1";
  EXPECT_FALSE(check_consumer_env(many).ok());
}

}  // namespace
}  // namespace yonder::exec

// The pure part of `yonder run --mesh`'s flags (cli/mesh_commands.h).
#include <gtest/gtest.h>

#include "cli/mesh_commands.h"

namespace yonder::cli {
namespace {

TEST(MeshFlags, CudaCapabilityParses) {
  EXPECT_EQ(parse_cuda_capability("8.0").value(), 800u);
  EXPECT_EQ(parse_cuda_capability("8.6").value(), 806u);
  EXPECT_EQ(parse_cuda_capability("9").value(), 900u);
  EXPECT_EQ(parse_cuda_capability("12.10").value(), 1210u);
}

TEST(MeshFlags, BadCudaCapabilityIsRefusedWithAnExample) {
  for (const char* bad : {"", ".", "8.", ".6", "x", "8.6.1", "-1", "100.0", "8.100", "8,6", " 8.0"}) {
    auto r = parse_cuda_capability(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(r.error().message().find("like 8.0"), std::string::npos);
  }
}

}  // namespace
}  // namespace yonder::cli

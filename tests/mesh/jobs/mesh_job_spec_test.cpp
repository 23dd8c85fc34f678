// What POST /v1/mesh/jobs takes, decoded once into the typed spec that
// mesh arrays also build directly.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "mesh/jobs/mesh_jobs.h"

namespace yonder::mesh {
namespace {

using nlohmann::json;

TEST(MeshJobSpec, TheRoutesBodyDecodesIntoTheTypedSpec) {
  auto spec = parse_mesh_job_spec({{"job", {{"image", "python"}, {"command", {"python", "x.py"}}, {"gpus", 1}}},
                                   {"dir", "/home/a/proj"},
                                   {"needs", {{"gpus", 1}}},
                                   {"retries", 2},
                                   {"replicas", 3},
                                   {"validator", "python check.py"},
                                   {"outputs_limit", "off"}});
  ASSERT_TRUE(spec.ok()) << spec.error().to_string();
  EXPECT_EQ(spec->job.image, "python");
  EXPECT_EQ(spec->job.gpus, 1);
  EXPECT_EQ(spec->dir, "/home/a/proj");
  EXPECT_EQ(spec->needs, (json{{"gpus", 1}}));
  EXPECT_EQ(spec->retries, 2u);
  EXPECT_EQ(spec->replicas, 3u);
  EXPECT_EQ(spec->validator, "python check.py");
  EXPECT_TRUE(spec->outputs_unlimited);
  auto plain = parse_mesh_job_spec({{"job", {{"image", "python"}}}});
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->replicas, 1u);
  EXPECT_EQ(plain->retries, 0u);
  EXPECT_FALSE(plain->outputs_unlimited);
}

TEST(MeshJobSpec, ABadFieldIsNamed) {
  for (const auto& [body, says] : std::vector<std::pair<json, std::string>>{
           {json::object(), "\"job\""},
           {{{"job", {{"image", "python"}, {"colour", 1}}}}, "colour"},
           {{{"job", {{"image", "python"}}}, {"dir", "relative/path"}}, "\"dir\""},
           {{{"job", {{"image", "python"}}}, {"needs", 3}}, "\"needs\""},
           {{{"job", {{"image", "python"}}}, {"replicas", 0}}, "replicas"},
           {{{"job", {{"image", "python"}}}, {"retries", -1}}, "retries"},
           {{{"job", {{"image", "python"}}}, {"validator", 7}}, "validator"},
           {{{"job", {{"image", "python"}}}, {"outputs_limit", "on"}}, "outputs_limit"}}) {
    auto spec = parse_mesh_job_spec(body);
    ASSERT_FALSE(spec.ok()) << body.dump();
    EXPECT_EQ(spec.error().code(), ErrorCode::kInvalidArgument) << body.dump();
    EXPECT_NE(spec.error().message().find(says), std::string::npos) << spec.error().message();
  }
}

}  // namespace
}  // namespace yonder::mesh

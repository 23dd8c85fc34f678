#include "exec/image_policy.h"

#include <gtest/gtest.h>

namespace yonder::exec {
namespace {

std::string norm(const std::string& s) {
  auto r = parse_image_ref(s);
  return r ? r->to_string() : "ERROR: " + r.error().message();
}

TEST(ImageRef, NormalisesLikeDocker) {
  EXPECT_EQ(norm("python"), "docker.io/library/python:latest");
  EXPECT_EQ(norm("python:3.12-slim"), "docker.io/library/python:3.12-slim");
  EXPECT_EQ(norm("pytorch/pytorch:2.3"), "docker.io/pytorch/pytorch:2.3");
  EXPECT_EQ(norm("docker.io/python"), "docker.io/library/python:latest");
  EXPECT_EQ(norm("index.docker.io/library/python"), "docker.io/library/python:latest");
  EXPECT_EQ(norm("ghcr.io/acme/train:v1"), "ghcr.io/acme/train:v1");
  EXPECT_EQ(norm("localhost:5000/x/y"), "localhost:5000/x/y:latest");
  std::string digest = "sha256:" + std::string(64, 'a');
  EXPECT_EQ(norm("python@" + digest), "docker.io/library/python@" + digest);
}

TEST(ImageRef, RefusesMalformedReferences) {
  for (const char* bad : {"", "Python", "python:", "python@sha256:abc", "a//b", "-x", "x:t@t", "python:a b",
                          "ghcr.io/Acme/x"}) {
    EXPECT_FALSE(parse_image_ref(bad).ok()) << bad;
  }
  EXPECT_FALSE(parse_image_ref(std::string(600, 'a')).ok());
}

TEST(ImagePolicy, ExactRulesHaveNoPrefixLoophole) {
  auto p = ImagePolicy::parse("python, ghcr.io/acme/*", "never");
  ASSERT_TRUE(p.ok()) << p.error().to_string();
  auto allowed = [&](const std::string& image) { return p->check(*parse_image_ref(image)).ok(); };
  EXPECT_TRUE(allowed("python"));
  EXPECT_TRUE(allowed("python:3.11"));
  EXPECT_TRUE(allowed("docker.io/library/python:3"));
  EXPECT_FALSE(allowed("python/anything"));
  EXPECT_FALSE(allowed("pythonista"));
  EXPECT_FALSE(allowed("evil.io/library/python"));
  EXPECT_FALSE(allowed("docker.io/library/python-evil"));
  EXPECT_TRUE(allowed("ghcr.io/acme/train"));
  EXPECT_TRUE(allowed("ghcr.io/acme/team/train:v2"));
  EXPECT_FALSE(allowed("ghcr.io/acme"));
  EXPECT_FALSE(allowed("ghcr.io/acmeevil/train"));
  EXPECT_FALSE(allowed("ghcr.io/acme-evil/train"));
  auto refused = p->check(*parse_image_ref("busybox"));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code(), ErrorCode::kPermissionDenied);
  EXPECT_NE(refused.error().message().find("executor.image_allowlist: python, ghcr.io/acme/*"), std::string::npos)
      << refused.error().message();
}

TEST(ImagePolicy, PrefixRuleWithoutRegistryIsBelowDockerHub) {
  auto p = ImagePolicy::parse("pytorch/*", "missing");
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->check(*parse_image_ref("pytorch/pytorch:2")).ok());
  EXPECT_FALSE(p->check(*parse_image_ref("pytorch")).ok());  // docker.io/library/pytorch
}

TEST(ImagePolicy, DigestPinsRefuseOtherDigests) {
  std::string a = "sha256:" + std::string(64, 'a'), b = "sha256:" + std::string(64, 'b');
  auto p = ImagePolicy::parse("python@" + a, "never");
  ASSERT_TRUE(p.ok()) << p.error().to_string();
  auto rule = p->check(*parse_image_ref("python@" + a));
  ASSERT_TRUE(rule.ok());
  EXPECT_EQ(rule->digest, a);
  EXPECT_FALSE(p->check(*parse_image_ref("python@" + b)).ok());
  // A tag: allowed here, the executor then checks the local image's digest.
  auto tagged = p->check(*parse_image_ref("python:3"));
  ASSERT_TRUE(tagged.ok());
  EXPECT_EQ(tagged->digest, a);
}

TEST(ImagePolicy, BadConfigIsRefusedWithTheSettingNamed) {
  auto tag = ImagePolicy::parse("python:3.12", "never");
  ASSERT_FALSE(tag.ok());
  EXPECT_NE(tag.error().to_string().find("names a tag"), std::string::npos);
  auto pull = ImagePolicy::parse("python", "sometimes");
  ASSERT_FALSE(pull.ok());
  EXPECT_NE(pull.error().message().find("executor.pull_policy"), std::string::npos);
  EXPECT_FALSE(ImagePolicy::parse("Bad/*", "never").ok());
  auto empty = ImagePolicy::parse("", "never");
  ASSERT_TRUE(empty.ok());
  auto none = empty->check(*parse_image_ref("python"));
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message().find("no image is allowed"), std::string::npos);
}

}  // namespace
}  // namespace yonder::exec

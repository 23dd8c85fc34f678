// prefer_system_node: how `yonder` finds the Debian package's system daemon
// (/var/lib/yonder) when the user has no node of their own.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "config/config.h"

namespace yonder::config {
namespace {

EnvFn env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

ExistsFn files(std::set<std::string> present) {
  return [present = std::move(present)](const std::string& p) { return present.count(p) > 0; };
}

Paths user_paths(const EnvFn& env) {
  auto p = resolve_paths(env);
  EXPECT_TRUE(p.ok());
  return *p;
}

TEST(SystemNode, UsedWhenTheUserHasNoNodeAndTheSystemHasOne) {
  auto env = env_of({{"HOME", "/home/ann"}});
  Paths p = prefer_system_node(user_paths(env), env, files({"/var/lib/yonder/identity.key"}));
  EXPECT_EQ(p.home, "/var/lib/yonder");
  EXPECT_EQ(p.config_file, "/var/lib/yonder/config.toml");
  EXPECT_EQ(p.default_socket(), "/var/lib/yonder/yonderd.sock");
  EXPECT_EQ(p.api_token_file(), "/var/lib/yonder/api-token");
}

TEST(SystemNode, TheUsersOwnNodeWins) {
  auto env = env_of({{"HOME", "/home/ann"}});
  Paths p = prefer_system_node(user_paths(env), env,
                               files({"/home/ann/.local/share/yonder/identity.key", "/var/lib/yonder/identity.key"}));
  EXPECT_EQ(p.home, "/home/ann/.local/share/yonder");
  EXPECT_EQ(p.config_file, "/home/ann/.config/yonder/config.toml");
}

TEST(SystemNode, AnExplicitYonderHomeWinsEvenWithoutANode) {
  auto env = env_of({{"HOME", "/home/ann"}, {"YONDER_HOME", "/tmp/n1"}});
  Paths p = prefer_system_node(user_paths(env), env, files({"/var/lib/yonder/identity.key"}));
  EXPECT_EQ(p.home, "/tmp/n1");
}

TEST(SystemNode, NoNodeAnywhereKeepsTheUsersDefault) {
  // `yonder init` then creates the user's own node, as before.
  auto env = env_of({{"HOME", "/home/ann"}});
  Paths p = prefer_system_node(user_paths(env), env, files({}));
  EXPECT_EQ(p.home, "/home/ann/.local/share/yonder");
}

TEST(SystemNode, YonderConfigStillPicksTheConfigFile) {
  auto env = env_of({{"HOME", "/root"}, {"YONDER_CONFIG", "/etc/yonder.toml"}});
  Paths p = prefer_system_node(user_paths(env), env, files({"/srv/y/identity.key"}), "/srv/y");
  EXPECT_EQ(p.home, "/srv/y");
  EXPECT_EQ(p.config_file, "/etc/yonder.toml");
}

}  // namespace
}  // namespace yonder::config

#include "config/config.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <map>

#include "support/temp_dir.h"

namespace yonder::config {
namespace {

EnvFn fake_env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(Config, DefaultsWhenEmpty) {
  auto cfg = Config::parse("", "config.toml");
  ASSERT_TRUE(cfg.ok());
  EXPECT_EQ(cfg->get("log.level"), "info");
  EXPECT_EQ(cfg->source("log.level"), Source::kDefault);
  EXPECT_EQ(cfg->get_int("api.request_timeout_s"), 30);
}

TEST(Config, LiveSettingsAreKnownAndMarkedInTheDocs) {
  for (const char* key : {"log.level", "history.interval_s", "jobs.max_per_peer", "jobs.max_queued",
                          "jobs.max_queued_per_peer", "credits.queue_order"}) {
    EXPECT_TRUE(applies_live(key)) << key;
    EXPECT_NE(find_setting(key), nullptr) << key << " is live but not a setting";
  }
  EXPECT_FALSE(applies_live("link.listen"));  // a listener is bound at start
  EXPECT_FALSE(applies_live("no.such"));
  std::string docs = settings_markdown();
  auto line_of = [&](const std::string& key) {
    size_t at = docs.find("| `" + key + "` |");
    return at == std::string::npos ? std::string() : docs.substr(at, docs.find('\n', at) - at);
  };
  EXPECT_NE(line_of("jobs.max_per_peer").find("*(live)*"), std::string::npos) << line_of("jobs.max_per_peer");
  ASSERT_FALSE(line_of("link.listen").empty());
  EXPECT_EQ(line_of("link.listen").find("*(live)*"), std::string::npos) << line_of("link.listen");
}

TEST(Config, ANodeNameWithControlCharactersIsRefused) {
  auto cfg = Config::parse("[node]\nname = \"ev\\u001b]52;c;eA==\\u0007il\"\n", "c.toml");
  ASSERT_FALSE(cfg.ok());
  EXPECT_NE(cfg.error().message().find("printable"), std::string::npos) << cfg.error().message();
  EXPECT_EQ(cfg.error().message().find('\x1b'), std::string::npos);  // the refusal itself is safe to print
  Config ok;
  EXPECT_FALSE(ok.set("node.name", "a\nb").ok());
  EXPECT_TRUE(ok.set("node.name", "研究室 GPU").ok());
}

TEST(Config, ReadsTablesAndTypes) {
  auto cfg = Config::parse("[log]\nlevel = \"debug\"\n[api]\nrequest_timeout_s = 5\n", "c.toml");
  ASSERT_TRUE(cfg.ok()) << cfg.error().to_string();
  EXPECT_EQ(cfg->get("log.level"), "debug");
  EXPECT_EQ(cfg->source("log.level"), Source::kFile);
  EXPECT_EQ(cfg->get_int("api.request_timeout_s"), 5);
}

TEST(Config, BadTomlGivesLineAndColumn) {
  auto cfg = Config::parse("[log]\nlevel = \"debug\"\nformat = = \"json\"\n", "/etc/y.toml");
  ASSERT_FALSE(cfg.ok());
  EXPECT_EQ(cfg.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(cfg.error().to_string().find("/etc/y.toml:3:"), std::string::npos) << cfg.error().to_string();
}

TEST(Config, UnknownKeyAndWrongTypeAreErrorsWithPosition) {
  auto unknown = Config::parse("[log]\nlevle = \"debug\"\n", "c.toml");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().to_string().find("c.toml:2:1"), std::string::npos) << unknown.error().to_string();
  EXPECT_NE(unknown.error().to_string().find("log.levle"), std::string::npos);

  auto wrong_type = Config::parse("[api]\nrequest_timeout_s = \"soon\"\n", "c.toml");
  ASSERT_FALSE(wrong_type.ok());
  EXPECT_NE(wrong_type.error().to_string().find("must be an integer"), std::string::npos);

  auto not_allowed = Config::parse("[log]\nformat = \"xml\"\n", "c.toml");
  ASSERT_FALSE(not_allowed.ok());
  EXPECT_NE(not_allowed.error().to_string().find("auto,text,json"), std::string::npos);

  auto top_level = Config::parse("level = 1\n", "c.toml");
  ASSERT_FALSE(top_level.ok());
}

TEST(Config, EnvironmentOverridesFile) {
  auto cfg = Config::parse("[log]\nlevel = \"debug\"\n", "c.toml");
  ASSERT_TRUE(cfg.ok());
  ASSERT_TRUE(cfg->apply_env(fake_env({{"YONDER_LOG_LEVEL", "warn"}})).ok());
  EXPECT_EQ(cfg->get("log.level"), "warn");
  EXPECT_EQ(cfg->source("log.level"), Source::kEnv);
  auto bad = cfg->apply_env(fake_env({{"YONDER_LOG_FORMAT", "xml"}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().to_string().find("YONDER_LOG_FORMAT"), std::string::npos);
}

TEST(Config, SetSaveLoadRoundTripWithDocs) {
  testing::TempDir dir;
  std::string path = dir / "sub/config.toml";
  Config cfg;
  ASSERT_TRUE(cfg.set("node.name", "studio \"main\"").ok());
  ASSERT_TRUE(cfg.set("api.request_timeout_s", "12").ok());
  EXPECT_FALSE(cfg.set("api.request_timeout_s", "12s").ok());
  EXPECT_FALSE(cfg.set("no.such", "1").ok());
  ASSERT_TRUE(cfg.save(path).ok());
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto back = Config::load(path);
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(back->get("node.name"), "studio \"main\"");
  EXPECT_EQ(back->get_int("api.request_timeout_s"), 12);
  EXPECT_NE(cfg.to_toml().find("# Name shown to peers"), std::string::npos);
  ASSERT_TRUE(back->unset("node.name").ok());
  EXPECT_EQ(back->source("node.name"), Source::kDefault);
}

// A section's settings are not together in the registry; the saved file
// still names each [table] once (TOML refuses a table defined twice: two
// `yonder config set` calls once made config.toml unreadable).
TEST(Config, EverySettingSavedLoadsBack) {
  testing::TempDir dir;
  std::string path = dir / "config.toml";
  Config cfg;
  ASSERT_TRUE(cfg.set("api.socket", "/run/other.sock").ok());
  ASSERT_TRUE(cfg.set("executor.backend", "slurm").ok());
  ASSERT_TRUE(cfg.set("api.request_timeout_s", "3").ok());
  ASSERT_TRUE(cfg.set("log.level", "debug").ok());
  ASSERT_TRUE(cfg.save(path).ok());
  auto back = Config::load(path);
  ASSERT_TRUE(back.ok()) << back.error().to_string() << "\n" << cfg.to_toml();
  EXPECT_EQ(back->get("api.socket"), "/run/other.sock");
  EXPECT_EQ(back->get_int("api.request_timeout_s"), 3);
  EXPECT_EQ(back->get("executor.backend"), "slurm");
  std::string text = cfg.to_toml();
  EXPECT_EQ(text.find("[api]"), text.rfind("[api]")) << text;
}

TEST(Config, MissingFileIsEmptyConfig) {
  auto cfg = Config::load("/nonexistent/yonder/config.toml");
  ASSERT_TRUE(cfg.ok());
  EXPECT_EQ(cfg->get("log.format"), "auto");
}

TEST(Paths, HomeAndConfigResolution) {
  auto p = resolve_paths(fake_env({{"YONDER_HOME", "/n1"}, {"HOME", "/root"}}));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->home, "/n1");
  EXPECT_EQ(p->config_file, "/n1/config.toml");
  auto d = resolve_paths(fake_env({{"HOME", "/home/u"}}));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->home, "/home/u/.local/share/yonder");
  EXPECT_EQ(d->config_file, "/home/u/.config/yonder/config.toml");
  auto c = resolve_paths(fake_env({{"HOME", "/home/u"}, {"YONDER_CONFIG", "/etc/yonder.toml"}}));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->config_file, "/etc/yonder.toml");
  EXPECT_FALSE(resolve_paths(fake_env({})).ok());
}

TEST(Settings, EveryKeyHasTableDocAndValidDefault) {
  for (const auto& s : all_settings()) {
    EXPECT_NE(s.key.find('.'), std::string_view::npos) << s.key;
    EXPECT_FALSE(s.doc.empty()) << s.key;
    if (!s.default_value.empty()) {
      EXPECT_TRUE(validate_value(s, s.default_value).ok()) << s.key;
    }
  }
  EXPECT_NE(settings_markdown().find("`log.level`"), std::string::npos);
}

}  // namespace
}  // namespace yonder::config

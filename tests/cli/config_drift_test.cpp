// What `config show`/`get` report while yonderd runs (cli/config_drift.h).
#include "cli/config_drift.h"

#include <gtest/gtest.h>

namespace yonder::cli {
namespace {

using nlohmann::json;

const SettingLine& line_of(const std::vector<SettingLine>& lines, const std::string& key) {
  for (const auto& l : lines) {
    if (l.key == key) return l;
  }
  static SettingLine none;
  ADD_FAILURE() << "no line for " << key;
  return none;
}

TEST(SettingLines, WhatRunsAndWhatTheFileWouldChangeAtTheNextStart) {
  auto file = config::Config::parse("[log]\nlevel = \"warn\"\n[jobs]\nmax_concurrent = 3\n", "config.toml");
  ASSERT_TRUE(file.ok());
  json running = {{"settings",
                   {{{"key", "log.level"}, {"value", "debug"}, {"source", "file"}},
                    {{"key", "jobs.max_concurrent"}, {"value", "3"}, {"source", "file"}},
                    {{"key", "link.listen"}, {"value", "127.0.0.1:0"}, {"source", "env"}}}}};
  auto lines = setting_lines(*file, *file, running);
  const auto& level = line_of(lines, "log.level");
  EXPECT_EQ(level.value, "debug");
  EXPECT_EQ(level.source, "file");
  EXPECT_EQ(level.on_restart, "warn");
  EXPECT_FALSE(line_of(lines, "jobs.max_concurrent").on_restart.has_value());  // the same
  // From the daemon's environment: the file does not decide it.
  EXPECT_FALSE(line_of(lines, "link.listen").on_restart.has_value());
  // A setting the running daemon does not know (it is older).
  EXPECT_EQ(line_of(lines, "api.listen").source, "unknown to the running yonderd");
}

TEST(SettingLines, WithoutADaemonTheValuesItWouldStartWith) {
  auto here = config::Config::parse("[log]\nlevel = \"warn\"\n", "config.toml");
  ASSERT_TRUE(here.ok());
  auto lines = setting_lines(*here, *here, nullptr);
  EXPECT_EQ(line_of(lines, "log.level").value, "warn");
  EXPECT_EQ(line_of(lines, "log.level").source, "file");
  for (const auto& l : lines) EXPECT_FALSE(l.on_restart.has_value()) << l.key;
}

}  // namespace
}  // namespace yonder::cli

// yonder and yonderd as a user runs them: real binaries, a real unix socket,
// a real SQLite file, each test in its own state folder.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace yonder::testing {
namespace {

class DaemonCli : public ::testing::Test {
 protected:
  DaemonCli() {
    env_ = {{"YONDER_HOME", dir_ / "home"},
            {"YONDER_CONFIG", ""},
            {"YONDER_LINK_LISTEN", "127.0.0.1:0"},
            // Deterministic GPU state on any machine: a library path that does not exist.
            {"YONDER_GPU_INVENTORY", "nvml:/nonexistent/libnvidia-ml.so.1"},
            {"YONDER_PASSPHRASE", ""},
            {"YONDER_PASSPHRASE_FILE", ""}};
  }
  RunResult yonder(std::vector<std::string> args, const Env& extra = {}) {
    args.insert(args.begin(), program_path("yonder"));
    Env env = env_;
    for (const auto& [k, v] : extra) env[k] = v;
    return run(args, env);
  }
  std::string init(const std::string& name = "studio") {
    auto r = yonder({"init", "--name", name, "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out)["node_id"].get<std::string>();
  }

  TempDir dir_;
  Env env_;
};

TEST_F(DaemonCli, InitThenStatusShowsTheSameNodeId) {
  std::string id = init();
  EXPECT_EQ(id.size(), 63u);
  Daemon d(env_);
  ASSERT_TRUE(d.ready()) << d.log();
  auto r = yonder({"status", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["node_id"], id);
  EXPECT_EQ(j["name"], "studio");
  EXPECT_EQ(j["pid"], d.pid());
  EXPECT_EQ(j["backends"], nlohmann::json::array({"docker"}));
  EXPECT_EQ(j["peers"], 0);
  auto human = yonder({"status"});
  ASSERT_EQ(human.exit_code, 0);
  EXPECT_NE(human.out.find("Node      " + id), std::string::npos) << human.out;
}

TEST_F(DaemonCli, InitNeverReplacesAnIdentity) {
  std::string id = init();
  auto again = yonder({"init"});
  EXPECT_EQ(again.exit_code, 4);
  EXPECT_NE(again.err.find(id), std::string::npos) << again.err;
  EXPECT_NE(again.err.find("never replaces"), std::string::npos);
  // The node still has the first identity.
  Daemon d(env_);
  ASSERT_TRUE(d.ready()) << d.log();
  EXPECT_EQ(nlohmann::json::parse(yonder({"status", "--json"}).out)["node_id"], id);
}

TEST_F(DaemonCli, StateFolderAndFilesArePrivate) {
  init();
  struct stat st {};
  ASSERT_EQ(::stat((dir_ / "home").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(::stat((dir_ / "home/identity.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  Daemon d(env_);
  ASSERT_TRUE(d.ready()) << d.log();
  ASSERT_EQ(::stat((dir_ / "home/yonderd.sock").c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(DaemonCli, GpuWithoutNvmlIsAClearStateWithExitCode10) {
  init();
  Daemon d(env_);
  ASSERT_TRUE(d.ready()) << d.log();
  auto r = yonder({"gpu"});
  EXPECT_EQ(r.exit_code, 10);
  EXPECT_NE(r.err.find("no_library"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("driver"), std::string::npos) << r.err;
  auto j = yonder({"gpu", "--json"});
  EXPECT_EQ(j.exit_code, 10);
  EXPECT_EQ(nlohmann::json::parse(j.out)["state"], "no_library");
}

TEST_F(DaemonCli, GpuWithFakeInventoryIsLabelledFake) {
  init();
  env_["YONDER_GPU_INVENTORY"] = "fake:2";
  Daemon d(env_);
  ASSERT_TRUE(d.ready()) << d.log();
  auto r = yonder({"gpu"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("FAKE"), std::string::npos) << r.out;
  auto j = nlohmann::json::parse(yonder({"gpu", "--json"}).out);
  EXPECT_EQ(j["devices"].size(), 2u);
  EXPECT_EQ(j["source"], "fake");
}

TEST_F(DaemonCli, CliSaysWhenTheDaemonIsNotRunning) {
  init();
  auto r = yonder({"status"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("yonderd is not running"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("Start it with"), std::string::npos);
}

TEST_F(DaemonCli, RefusesToStartWithAKeyReadableByOthers) {
  init();
  std::string key = dir_ / "home/identity.key";
  ASSERT_EQ(::chmod(key.c_str(), 0644), 0);
  Daemon d(env_);
  EXPECT_FALSE(d.ready());
  EXPECT_EQ(d.wait(), 1);
  EXPECT_NE(d.log().find("chmod 600 " + key), std::string::npos) << d.log();
}

TEST_F(DaemonCli, RefusesToStartWithoutIdentity) {
  Daemon d(env_);
  EXPECT_FALSE(d.ready());
  EXPECT_EQ(d.wait(), 1);
  EXPECT_NE(d.log().find("yonder init"), std::string::npos) << d.log();
}

TEST_F(DaemonCli, SigtermShutsDownCleanlyAndRemovesTheSocket) {
  init();
  Daemon d(env_);
  ASSERT_TRUE(d.ready()) << d.log();
  EXPECT_EQ(d.stop(), 0);
  EXPECT_NE(::access((dir_ / "home/yonderd.sock").c_str(), F_OK), 0);
  EXPECT_NE(d.log().find("stopped"), std::string::npos);
}

TEST_F(DaemonCli, ShutdownCommandStopsTheDaemon) {
  init();
  Daemon d(env_);
  ASSERT_TRUE(d.ready()) << d.log();
  auto r = yonder({"shutdown"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(d.wait(), 0);
}

TEST_F(DaemonCli, OneDaemonPerStateFolder) {
  init();
  Daemon first(env_);
  ASSERT_TRUE(first.ready()) << first.log();
  Env other = env_;
  Daemon second(other, {});
  EXPECT_FALSE(second.ready());
  EXPECT_EQ(second.wait(), 1);
  EXPECT_NE(second.log().find("already running"), std::string::npos) << second.log();
  // The first one is unharmed.
  EXPECT_EQ(yonder({"status"}).exit_code, 0);
}

TEST_F(DaemonCli, EncryptedKeyNeedsThePassphrase) {
  auto r = yonder({"init", "--passphrase", "--json"}, {{"YONDER_PASSPHRASE", "s3cret pass"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(nlohmann::json::parse(r.out)["encrypted"].get<bool>());
  {
    Daemon without(env_);
    EXPECT_FALSE(without.ready());
    EXPECT_EQ(without.wait(), 1);
    EXPECT_NE(without.log().find("YONDER_PASSPHRASE"), std::string::npos) << without.log();
  }
  {
    Env wrong = env_;
    wrong["YONDER_PASSPHRASE"] = "guess";
    Daemon d(wrong);
    EXPECT_FALSE(d.ready());
    EXPECT_NE(d.log().find("wrong passphrase"), std::string::npos) << d.log();
  }
  Env right = env_;
  right["YONDER_PASSPHRASE"] = "s3cret pass";
  Daemon d(right);
  ASSERT_TRUE(d.ready()) << d.log();
  EXPECT_EQ(d.log().find("s3cret"), std::string::npos) << "the passphrase must never be logged";
}

TEST_F(DaemonCli, JsonLogLines) {
  init();
  Daemon d(env_, {"--log-format", "json"});
  ASSERT_TRUE(d.ready());
  d.stop();
  std::string log = d.log();
  size_t lines = 0;
  size_t start = 0;
  while (start < log.size()) {
    size_t nl = log.find('\n', start);
    std::string line = log.substr(start, nl - start);
    start = nl == std::string::npos ? log.size() : nl + 1;
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    ASSERT_TRUE(j.is_object()) << line;
    EXPECT_TRUE(j.contains("level") && j.contains("msg") && j.contains("ts"));
    ++lines;
  }
  EXPECT_GE(lines, 2u);
}

TEST_F(DaemonCli, ConfigSetGetShow) {
  init();
  auto set = yonder({"config", "set", "log.level", "debug"});
  EXPECT_EQ(set.exit_code, 0) << set.err;
  EXPECT_EQ(yonder({"config", "get", "log.level"}).out, "debug\n");
  auto bad = yonder({"config", "set", "log.level", "loud"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("trace,debug,info,warn,error"), std::string::npos) << bad.err;
  auto unknown = yonder({"config", "get", "log.lvl"});
  EXPECT_EQ(unknown.exit_code, 2);
  auto show = yonder({"config", "show", "--json"});
  ASSERT_EQ(show.exit_code, 0);
  auto j = nlohmann::json::parse(show.out);
  bool found = false;
  for (const auto& s : j["settings"]) {
    if (s["key"] == "log.level") {
      found = true;
      EXPECT_EQ(s["value"], "debug");
      EXPECT_EQ(s["source"], "file");
    }
  }
  EXPECT_TRUE(found);
  // The environment wins over the file.
  EXPECT_EQ(yonder({"config", "get", "log.level"}, {{"YONDER_LOG_LEVEL", "error"}}).out, "error\n");
}

TEST_F(DaemonCli, ConfigShowsWhatTheRunningDaemonUsesAppliesLiveSettingsAndSaysWhatWaitsForARestart) {
  init();
  ASSERT_EQ(yonder({"config", "set", "jobs.stop_grace_s", "7"}).exit_code, 0);
  ASSERT_EQ(yonder({"config", "set", "log.level", "info"}).exit_code, 0);
  {
    Daemon d(env_);
    ASSERT_TRUE(d.ready()) << d.log();
    auto same = yonder({"config", "get", "jobs.stop_grace_s"});
    EXPECT_EQ(same.out, "7\n");
    EXPECT_EQ(same.err, "");
    // A setting read only at start: the file changes, what runs does not.
    auto set = yonder({"config", "set", "jobs.stop_grace_s", "9"});  // while it runs
    ASSERT_EQ(set.exit_code, 0) << set.err;
    EXPECT_NE(set.out.find("restart yonderd to apply it"), std::string::npos) << set.out;
    auto get = yonder({"config", "get", "jobs.stop_grace_s"});
    EXPECT_EQ(get.out, "7\n");  // what runs
    EXPECT_NE(get.err.find("the file now says 9: restart yonderd to apply it"), std::string::npos) << get.err;
    // A live one: the daemon takes it at once, and says so in its log.
    auto live = yonder({"config", "set", "log.level", "debug"});
    ASSERT_EQ(live.exit_code, 0) << live.err;
    EXPECT_NE(live.out.find("the running yonderd applied it now"), std::string::npos) << live.out;
    auto live_get = yonder({"config", "get", "log.level"});
    EXPECT_EQ(live_get.out, "debug\n");
    EXPECT_EQ(live_get.err, "");
    EXPECT_NE(d.log().find("setting log.level is now debug (applied live)"), std::string::npos) << d.log();
    // This shell's environment is not the daemon's: what runs is asked of it.
    EXPECT_EQ(yonder({"config", "get", "log.level"}, {{"YONDER_LOG_LEVEL", "error"}}).out, "debug\n");
    auto show = nlohmann::json::parse(yonder({"config", "show", "--json"}).out);
    EXPECT_EQ(show["running"], true);
    for (const auto& s : show["settings"]) {
      if (s["key"] == "jobs.stop_grace_s") {
        EXPECT_EQ(s["value"], "7");
        EXPECT_EQ(s["source"], "file");
        EXPECT_EQ(s["on_restart"], "9");
      } else if (s["key"] == "log.level") {
        EXPECT_EQ(s["value"], "debug");
        EXPECT_EQ(s["source"], "file");
        EXPECT_FALSE(s.contains("on_restart")) << s;
      } else {
        EXPECT_FALSE(s.contains("on_restart")) << s;
      }
    }
    auto text = yonder({"config", "show"}).out;
    EXPECT_NE(text.find("# values: what the running yonderd uses"), std::string::npos) << text;
    EXPECT_NE(text.find("1 setting(s) in the file differ from what runs"), std::string::npos) << text;
    // Unset: back to the default, live too.
    auto unset = yonder({"config", "unset", "log.level"});
    EXPECT_NE(unset.out.find("log.level = info  (in"), std::string::npos) << unset.out;
    EXPECT_NE(unset.out.find("applied it now"), std::string::npos) << unset.out;
  }
  // Stopped: the values it would start with, nothing pending.
  EXPECT_EQ(yonder({"config", "get", "jobs.stop_grace_s"}).out, "9\n");
  EXPECT_NE(yonder({"config", "set", "log.level", "warn"}).out.find("yonderd reads it when it starts"), std::string::npos);
  auto after = yonder({"config", "show", "--json"});
  auto j = nlohmann::json::parse(after.out);
  EXPECT_EQ(j["running"], false);
  EXPECT_EQ(yonder({"config", "get", "log.level"}).out, "warn\n");
  // A value the daemon took from its environment: the file does not decide it.
  Env with_env = env_;
  with_env["YONDER_LOG_LEVEL"] = "error";
  Daemon d(with_env);
  ASSERT_TRUE(d.ready()) << d.log();
  auto env_get = nlohmann::json::parse(yonder({"config", "get", "log.level", "--json"}).out);
  EXPECT_EQ(env_get["value"], "error");
  EXPECT_EQ(env_get["source"], "env");
  EXPECT_FALSE(env_get.contains("on_restart")) << env_get;
}

TEST_F(DaemonCli, BrokenConfigIsReportedWithLineAndColumn) {
  init();
  std::string cfg = dir_ / "home/config.toml";
  FILE* f = std::fopen(cfg.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("[log]\nlevel = \"info\n", f);
  std::fclose(f);
  auto r = yonder({"config", "show"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(cfg + ":2:"), std::string::npos) << r.err;
  Daemon d(env_);
  EXPECT_FALSE(d.ready());
  EXPECT_NE(d.log().find(cfg + ":2:"), std::string::npos) << d.log();
}

TEST_F(DaemonCli, UsageErrorsExitWith2) {
  EXPECT_EQ(yonder({"no-such-command"}).exit_code, 2);
  EXPECT_EQ(yonder({}).exit_code, 2);
}

}  // namespace
}  // namespace yonder::testing

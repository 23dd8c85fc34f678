#include "cli/run_options.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>

#include "support/temp_dir.h"

namespace yonder::cli {
namespace {

config::EnvFn fake_env(std::map<std::string, std::string> vars) {
  return [vars](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

using Pairs = std::vector<std::pair<std::string, std::string>>;

TEST(EnvFile, ReadsDockersFormat) {
  auto env = parse_env_file(
      "\xEF\xBB\xBF# a comment\n"
      "A=1\n"
      "\n"
      "   \t\n"
      "  B=two words  \n"
      "QUOTED=\"kept as is\"\n"
      "EMPTY=\n"
      "EQ=a=b\n"
      "HOME_DIR\n"
      "NOT_SET_HERE\n"
      "  # indented comment\n"
      "WINDOWS=crlf\r\n"
      "LAST=no newline",
      "vars.env", fake_env({{"HOME_DIR", "/home/me"}}));
  ASSERT_TRUE(env.ok()) << env.error().to_string();
  EXPECT_EQ(*env, (Pairs{{"A", "1"},
                         {"B", "two words  "},
                         {"QUOTED", "\"kept as is\""},
                         {"EMPTY", ""},
                         {"EQ", "a=b"},
                         {"HOME_DIR", "/home/me"},
                         {"WINDOWS", "crlf"},
                         {"LAST", "no newline"}}));
}

TEST(EnvFile, ABadLineIsNamedWithFileAndLine) {
  struct Case {
    const char* text;
    const char* says;
  };
  for (auto c :
       {Case{"A=1\n=x\n", "vars.env:2: no variable name"},
        Case{"A=1\n\nMY VAR=x\n", "vars.env:3: `MY VAR` is not a variable name"},
        Case{"1A=x", "vars.env:1: `1A` is not a variable name"}, Case{"export A=1", "vars.env:1: `export A` is not"}}) {
    auto r = parse_env_file(c.text, "vars.env", fake_env({}));
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.error().to_string().find(c.says), std::string::npos) << r.error().to_string();
  }
  auto nul = parse_env_file(std::string("A=x\0y", 5), "vars.env", fake_env({}));
  ASSERT_FALSE(nul.ok());
  EXPECT_NE(nul.error().to_string().find("vars.env:1: the value of A has a NUL"), std::string::npos);
  auto big = parse_env_file(std::string(kMaxEnvFileBytes + 1, '#'), "vars.env", fake_env({}));
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().code(), ErrorCode::kResourceExhausted);
  auto missing = read_env_file("/nonexistent/vars.env", fake_env({}));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().to_string().find("cannot read env file /nonexistent/vars.env"), std::string::npos);
}

TEST(JobFile, ReadsEveryField) {
  auto a = parse_job_file(R"(# train.toml
on = "studio"
image = "python:3"
command = ["python", "train.py", "--epochs", "3"]
gpus = 1
vram = "20G"
cpus = 0.5
memory = "16G"
disk = "50G"
shm_size = "8G"
name = "train-3"
time = "2h"
env_file = ".env"
workdir = "src"
out = ["results/", "metrics.json"]
ports = ["6006:6006", 8888]
upload = "project"
detach = false
tty = true

[env]
WANDB_MODE = "offline"
EPOCHS = 3
DEBUG = true
)",
                          "/jobs/train.toml", "/jobs");
  ASSERT_TRUE(a.ok()) << a.error().to_string();
  EXPECT_EQ(a->peer, "studio");
  EXPECT_EQ(a->image, "python:3");
  EXPECT_EQ(a->command, (std::vector<std::string>{"python", "train.py", "--epochs", "3"}));
  EXPECT_EQ(a->gpus, 1);
  EXPECT_EQ(a->vram, "20G");
  EXPECT_EQ(std::stod(*a->cpus), 0.5);
  EXPECT_EQ(a->memory, "16G");
  EXPECT_EQ(a->disk, "50G");
  EXPECT_EQ(a->shm, "8G");
  EXPECT_EQ(a->name, "train-3");
  EXPECT_EQ(a->time, "2h");
  EXPECT_EQ(a->env_files, (std::vector<std::string>{"/jobs/.env"}));  // relative to the file's folder
  EXPECT_EQ(a->workdir, "src");                                       // inside the job: as written
  EXPECT_EQ(a->out, (std::vector<std::string>{"results/", "metrics.json"}));
  EXPECT_EQ(a->ports, (std::vector<std::string>{"6006:6006", "8888"}));
  EXPECT_EQ(a->upload_dir, "/jobs/project");
  EXPECT_FALSE(a->no_upload);
  EXPECT_FALSE(a->detach);
  EXPECT_TRUE(a->tty);
  EXPECT_EQ(a->env, (std::vector<std::string>{"DEBUG=true", "EPOCHS=3", "WANDB_MODE=offline"}));  // toml++ sorts keys
}

TEST(JobFile, MeshPlacementKeys) {
  auto a = parse_job_file("mesh = true\ncuda = \"8.6\"\ngroup = \"lab\"\nlabels = [\"site=lab2\", \"gpu=big\"]\n",
                          "job.toml", "/jobs");
  ASSERT_TRUE(a.ok()) << a.error().to_string();
  EXPECT_TRUE(a->mesh);
  EXPECT_EQ(a->cuda, "8.6");
  EXPECT_EQ(a->group, "lab");
  EXPECT_EQ(a->labels, (std::vector<std::string>{"site=lab2", "gpu=big"}));
  auto t = parse_job_file("mesh = true\ncuda = 8.0\n[labels]\nsite = \"lab2\"\n", "job.toml", "/jobs");
  ASSERT_TRUE(t.ok()) << t.error().to_string();
  EXPECT_EQ(t->cuda, "8.0");
  EXPECT_EQ(t->labels, (std::vector<std::string>{"site=lab2"}));
  EXPECT_FALSE(parse_job_file("labels = [\"nokey\"]\n", "job.toml", "/jobs").ok());
  EXPECT_FALSE(parse_job_file("group = 3\n", "job.toml", "/jobs").ok());

  // Flags win; the file fills what they leave out.
  testing::TempDir dir;
  std::ofstream(dir / "job.toml") << "mesh = true\ngroup = \"lab\"\ncuda = \"8.0\"\nlabels = [\"site=lab2\"]\n";
  RunArgs cli;
  cli.job_file = dir / "job.toml";
  cli.group = "other";
  auto e = effective_run_args(cli, fake_env({}));
  ASSERT_TRUE(e.ok()) << e.error().to_string();
  EXPECT_TRUE(e->mesh);
  EXPECT_EQ(e->group, "other");
  EXPECT_EQ(e->cuda, "8.0");
  EXPECT_EQ(e->labels, (std::vector<std::string>{"site=lab2"}));
}

TEST(JobFile, MeshJobKeys) {
  auto a = parse_job_file("mesh = true\nretries = 2\nreplicas = 3\nvalidator = \"python check.py\"\n", "job.toml",
                          "/jobs");
  ASSERT_TRUE(a.ok()) << a.error().to_string();
  EXPECT_EQ(a->retries, 2);
  EXPECT_EQ(a->replicas, 3);
  EXPECT_EQ(a->validator, "python check.py");
  EXPECT_FALSE(parse_job_file("retries = \"two\"\n", "job.toml", "/jobs").ok());
  EXPECT_FALSE(parse_job_file("replicas = -1\n", "job.toml", "/jobs").ok());

  testing::TempDir dir;
  std::ofstream(dir / "job.toml") << "mesh = true\nretries = 2\nreplicas = 3\n";
  RunArgs cli;
  cli.job_file = dir / "job.toml";
  cli.retries = 0;
  auto e = effective_run_args(cli, fake_env({}));
  ASSERT_TRUE(e.ok()) << e.error().to_string();
  EXPECT_EQ(e->retries, 0);  // the flag wins
  EXPECT_EQ(e->replicas, 3);
  EXPECT_FALSE(e->validator);
}

TEST(JobFile, UnknownKeysAndWrongTypesNameTheKeyAndLine) {
  struct Case {
    const char* text;
    const char* says;
  };
  for (auto c : {Case{"image = \"x\"\nimgae = \"y\"\n", "job.toml:2: unknown key `imgae`; a job file has on, name, image"},
                 Case{"command = \"python train.py\"\n", "job.toml:1: `command` must be an array of strings"},
                 Case{"command = []\n", "job.toml:1: `command` must be a non-empty array"},
                 Case{"\n\ngpus = \"1\"\n", "job.toml:3: `gpus` must be a whole number"},
                 Case{"memory = 16\n", "job.toml:1: `memory` must be a size in quotes"},
                 Case{"ports = [\"80:x\"]\n", "job.toml:1: `80:x` is not LOCAL:REMOTE"},
                 Case{"[env]\nOK = \"1\"\n\"BAD NAME\" = \"2\"\n", "job.toml:3: `BAD NAME` is not a variable name"},
                 Case{"[env]\nX = 1.5\n", "job.toml:2: `env.X` must be a string"},
                 Case{"[resources]\ngpus = 1\n", "job.toml:1: unknown key `resources`"},
                 Case{"detach = \"yes\"\n", "job.toml:1: `detach` must be true or false"},
                 Case{"upload = \".\"\nno_upload = true\n", "contradict"}, Case{"image = \"x\n", "job.toml:1: "}}) {
    auto r = parse_job_file(c.text, "job.toml", "/jobs");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.error().to_string().find(c.says), std::string::npos) << c.text << " -> " << r.error().to_string();
  }
}

// The example in docs/cli.md stays a valid job file.
TEST(JobFile, TheDocumentedExampleParses) {
  const char* src = std::getenv("YONDER_SOURCE_DIR");
  ASSERT_NE(src, nullptr) << "run through ctest";
  std::ifstream in(std::string(src) + "/docs/cli.md");
  std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t start = doc.find("```toml\n# train.toml");
  ASSERT_NE(start, std::string::npos);
  start = doc.find('\n', start) + 1;
  std::string example = doc.substr(start, doc.find("```", start) - start);
  auto a = parse_job_file(example, "docs/cli.md", "/project");
  ASSERT_TRUE(a.ok()) << a.error().to_string();
  EXPECT_EQ(a->peer, "studio");
  EXPECT_EQ(a->ports, (std::vector<std::string>{"6006:6006"}));
  EXPECT_EQ(a->env_files, (std::vector<std::string>{"/project/.env"}));
}

TEST(PortPair, LocalRemoteOrRemoteAlone) {
  auto both = parse_port_pair("8080:80");
  ASSERT_TRUE(both.ok());
  EXPECT_EQ(both->local, 8080);
  EXPECT_EQ(both->remote, 80);
  EXPECT_EQ(parse_port_pair("0:80")->local, 0);
  EXPECT_EQ(parse_port_pair("6006")->local, 6006);
  for (const char* bad : {"", ":80", "80:", "80:0", "x:80", "70000:80", "80:80:80", "-1:80", "0"}) {
    EXPECT_FALSE(parse_port_pair(bad).ok()) << bad;
  }
}

// Flags win over the file; lists replace lists; the environment is merged
// by name: the file's env_file < its [env] < our --env-file < our -e.
TEST(EffectiveRunArgs, ABareDashEKeyTakesItsValueFromHereOrIsLeftOut) {
  RunArgs cli;
  cli.image = "python";
  cli.env = {"TOKEN", "UNSET_HERE", "PLAIN=1"};
  auto a = effective_run_args(cli, fake_env({{"TOKEN", "s3cret=x"}}));
  ASSERT_TRUE(a.ok()) << a.error().to_string();
  EXPECT_EQ(a->env, (std::vector<std::string>{"TOKEN=s3cret=x", "PLAIN=1"}));
  auto job = job_request_of(*a);
  ASSERT_TRUE(job.ok()) << job.error().to_string();
  EXPECT_EQ(job->env, (std::map<std::string, std::string>{{"PLAIN", "1"}, {"TOKEN", "s3cret=x"}}));
}

TEST(EffectiveRunArgs, FlagsOverrideTheJobFileAndEnvironmentLayersMerge) {
  testing::TempDir dir;
  std::ofstream(dir / "file.env") << "A=from-file-env-file\nB=from-file-env-file\nC=from-file-env-file\n"
                                     "D=from-file-env-file\nBARE\n";
  std::ofstream(dir / "cli.env") << "C=from-cli-env-file\nD=from-cli-env-file\n";
  std::ofstream(dir / "job.toml") << "on = \"studio\"\nimage = \"python:3\"\ncommand = [\"python\", \"x.py\"]\n"
                                     "gpus = 2\nmemory = \"4G\"\nout = [\"a\", \"b\"]\nenv_file = \"file.env\"\n"
                                     "detach = true\nupload = \"sub\"\n[env]\nB = \"from-file-env\"\n"
                                     "C = \"from-file-env\"\n";
  RunArgs cli;
  cli.job_file = dir / "job.toml";
  cli.image = "python:3.12";
  cli.memory = "8G";
  cli.out = {"c"};
  cli.env_files = {dir / "cli.env"};
  cli.env = {"D=from-cli-e"};
  auto a = effective_run_args(cli, fake_env({{"BARE", "from-our-env"}}));
  ASSERT_TRUE(a.ok()) << a.error().to_string();
  EXPECT_EQ(a->peer, "studio");
  EXPECT_EQ(a->image, "python:3.12");
  EXPECT_EQ(a->command, (std::vector<std::string>{"python", "x.py"}));
  EXPECT_EQ(a->gpus, 2);
  EXPECT_EQ(a->memory, "8G");
  EXPECT_EQ(a->out, (std::vector<std::string>{"c"}));
  EXPECT_TRUE(a->detach);
  EXPECT_EQ(a->upload_dir, dir / "sub");
  EXPECT_TRUE(a->env_files.empty());
  std::map<std::string, std::string> env;  // as cmd_run reads it: the last value of a name wins
  for (const auto& kv : a->env) env[kv.substr(0, kv.find('='))] = kv.substr(kv.find('=') + 1);
  EXPECT_EQ(env, (std::map<std::string, std::string>{{"A", "from-file-env-file"},
                                                     {"B", "from-file-env"},
                                                     {"C", "from-cli-env-file"},
                                                     {"D", "from-cli-e"},
                                                     {"BARE", "from-our-env"}}));

  cli.command = {"sh"};
  cli.no_upload = true;  // --no-upload on the command line beats the file's upload
  auto b = effective_run_args(cli, fake_env({}));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->command, (std::vector<std::string>{"sh"}));
  EXPECT_TRUE(b->no_upload);
  EXPECT_TRUE(b->upload_dir.empty());

  RunArgs missing;
  missing.job_file = dir / "nope.toml";
  EXPECT_FALSE(effective_run_args(missing, fake_env({})).ok());
  RunArgs bad_env_file;
  bad_env_file.env_files = {dir / "job.toml"};  // not KEY=VALUE lines
  auto e = effective_run_args(bad_env_file, fake_env({}));
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().to_string().find("job.toml:1:"), std::string::npos) << e.error().to_string();
}

TEST(JobRequestOf, TheFlagsBecomeTheOneRequestThatTravels) {
  RunArgs a;
  a.image = "python:3.11";
  a.command = {"python", "train.py"};
  a.env = {"A=1", "B=x=y", "A=2"};  // later entries win; a value may hold '='
  a.workdir = "src";
  a.tty = true;
  a.gpus = 2;
  a.vram = "8G";
  a.memory = "512M";
  a.disk = "1G";
  a.time = "2h";
  a.cpus = "0.5";
  a.shm = "256M";
  auto r = job_request_of(a);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->shm_mib, 256);
  EXPECT_EQ(r->env, (std::map<std::string, std::string>{{"A", "2"}, {"B", "x=y"}}));
  EXPECT_EQ(r->vram_mib, 8192);
  EXPECT_EQ(r->memory_mib, 512);
  EXPECT_EQ(r->disk_mib, 1024);
  EXPECT_EQ(r->wall_time_s, 7200);
  EXPECT_DOUBLE_EQ(r->cpus, 0.5);
  EXPECT_EQ(r->gpus, 2);
  // What the provider parses is what was asked.
  auto parsed = jobs::protocol::parse_job_request(r->to_json());
  ASSERT_TRUE(parsed.ok()) << parsed.error().to_string();
  EXPECT_EQ(parsed->to_json(), r->to_json());
  // Nothing given: zeros, the provider's defaults.
  RunArgs plain;
  plain.image = "python";
  auto p = job_request_of(plain);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->memory_mib, 0);
  EXPECT_EQ(p->wall_time_s, 0);
  EXPECT_EQ(p->gpus, 0);
}

TEST(JobRequestOf, AFractionOfAGpuOrVramAloneIsAShareOfOneGpu) {
  RunArgs a;
  a.image = "python";
  a.gpus = 0.5;
  auto half = job_request_of(a);
  ASSERT_TRUE(half.ok()) << half.error().to_string();
  EXPECT_EQ(half->share_permille, 500);
  EXPECT_EQ(half->gpus, 0);
  a.vram = "12G";  // with a fraction: its cap
  auto capped = job_request_of(a);
  ASSERT_TRUE(capped.ok());
  EXPECT_EQ(capped->share_permille, 500);
  EXPECT_EQ(capped->vram_mib, 12288);
  EXPECT_TRUE(jobs::protocol::parse_job_request(capped->to_json()).ok());
  RunArgs v;
  v.image = "python";
  v.vram = "8G";  // alone: a share of that much
  auto share = job_request_of(v);
  ASSERT_TRUE(share.ok());
  EXPECT_EQ(share->share_vram_mib, 8192);
  EXPECT_EQ(share->vram_mib, 0);
  EXPECT_EQ(share->gpus, 0);
  v.gpus = 1;  // with whole GPUs: the least each has, as before
  auto whole = job_request_of(v);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->vram_mib, 8192);
  EXPECT_EQ(whole->share_vram_mib, 0);
  EXPECT_FALSE(whole->share());
  for (double bad : {1.5, -1.0, 0.0001, 65.0}) {
    RunArgs b;
    b.image = "python";
    b.gpus = bad;
    auto r = job_request_of(b);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().message().find("--gpus"), std::string::npos) << r.error().message();
  }
}

TEST(JobRequestOf, ABadFlagIsNamed) {
  struct Case {
    void (*set)(RunArgs&);
    const char* says;
  };
  for (auto c : {Case{[](RunArgs& a) { a.env = {"NOEQUALS"}; }, "-e takes KEY=VALUE"},
                 Case{[](RunArgs& a) { a.env = {"=v"}; }, "-e takes KEY=VALUE"},
                 Case{[](RunArgs& a) { a.vram = "lots"; }, "--vram"},
                 Case{[](RunArgs& a) { a.vram = "20"; }, "--vram 20 has no unit: write 20G"},
                 Case{[](RunArgs& a) { a.disk = "512K"; }, "less than 1 MiB"},
                 Case{[](RunArgs& a) { a.memory = "12Q"; }, "--memory"},
                 Case{[](RunArgs& a) { a.time = "soon"; }, "--time"},
                 Case{[](RunArgs& a) { a.shm = "64"; }, "--shm-size 64 has no unit"},
                 Case{[](RunArgs& a) { a.shm = "0M"; }, "--shm-size 0M is less than 1 MiB"},
                 Case{[](RunArgs& a) { a.cpus = "0"; }, "--cpus"},
                 Case{[](RunArgs& a) { a.cpus = "2x"; }, "--cpus"}}) {
    RunArgs a;
    a.image = "python";
    c.set(a);
    auto r = job_request_of(a);
    ASSERT_FALSE(r.ok()) << c.says;
    EXPECT_EQ(r.error().code(), ErrorCode::kInvalidArgument) << c.says;
    EXPECT_NE(r.error().to_string().find(c.says), std::string::npos) << r.error().to_string();
  }
}

}  // namespace
}  // namespace yonder::cli

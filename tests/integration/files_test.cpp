// `yonder cp` end to end, both ways, with a running job that tries to turn
// the provider's copy against the host: symbolic links planted in its
// workspace must never be followed by the provider (root), neither to read
// host files out nor to write consumer files into host folders.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "support/docker_env.h"
#include "support/job_node.h"
#include "support/read_file.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"
#include "support/wait_until.h"

namespace yonder::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

class Files : public ::testing::Test {
 protected:
  void SetUp() override { YONDER_REQUIRE_DOCKER_OR_SKIP(); }
};

constexpr const char* kImage = "yonder-test/busybox:1";

// Every regular file's content under `dir`, concatenated.
std::string all_content(const std::string& dir) {
  std::string out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_regular_file() && !it->is_symlink()) out += read_file(it->path().string());
  }
  return out;
}

// Waits until the job's output contains `text` (bounded).
bool wait_for_output(const Node& node, const std::string& id, const std::string& text) {
  return wait_until(
      [&] {
        return node.yonder({"logs", id}).out.find(text) != std::string::npos;
      },
      std::chrono::seconds(120), std::chrono::milliseconds(100));
}

// Audit entries of `action` on `provider` for `subject`, waiting (bounded)
// until `ok` accepts one; returns it (null if none came).
json wait_for_audit(const Node& provider, const std::string& action, const std::string& subject,
                    const std::function<bool(const json&)>& ok) {
  json found = nullptr;
  wait_until(
      [&] {
        json audit = provider.yonder_json({"audit"});
        for (const auto& e : audit["entries"]) {
          if (e["action"] == action && e["subject"] == subject && ok(e)) {
            found = e;
            return true;
          }
        }
        return false;
      },
      std::chrono::seconds(120), std::chrono::milliseconds(100));
  return found;
}

TEST_F(Files, CpOutOfAndIntoARunningJobNeverFollowsTheJobsLinks) {
  TempDir dir;
  Node studio(dir, "studio", true), laptop(dir, "laptop", false);
  laptop.pair_with(studio, {"--scope", "run,files", "--max-jobs", "2"});
  // Host places the job aims its links at: a folder and a file outside it.
  std::string host_dir = dir / "hostside";
  fs::create_directories(host_dir);
  std::string host_file = dir / "host-secret.txt";
  std::ofstream(host_file) << "host secret\n";
  std::string hostname = read_file("/etc/hostname");

  std::string script = "echo hi > out.txt && ln -s /etc/hostname leak && ln -s " + host_file +
                       " leak2 && mkdir d && "
                       "echo inner > d/ok.txt && ln -s /etc d/etcdir && ln -s " +
                       host_dir +
                       " evil && mkdir inbox2 && "
                       "ln -s " +
                       host_file +
                       " inbox2/x.txt && echo ready && "
                       "i=0; while [ ! -f inbox/in.txt ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; "
                       "cat inbox/in.txt inbox2/x.txt; stat -c 'owner %u:%g' inbox/in.txt inbox; echo more >> "
                       "inbox/in.txt && echo appended";
  auto d = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "-d", "--", "sh", "-c", script});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  std::string id = d.out.substr(0, d.out.find('\n'));
  ASSERT_TRUE(wait_for_output(laptop, id, "ready")) << laptop.yonder({"logs", id}).out;

  // Out of the running job: a file, then everything.
  std::string dest = dir / "dest";
  fs::create_directories(dest);
  auto one = laptop.yonder({"cp", id + ":out.txt", dest});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_EQ(read_file(dest + "/out.txt"), "hi\n");
  for (const char* link : {"leak", "leak2", "d/etcdir/hostname", "evil"}) {
    auto r = laptop.yonder({"cp", id + ":" + link, dest});
    EXPECT_NE(r.exit_code, 0) << link;
    EXPECT_NE(r.err.find("symbolic link"), std::string::npos) << link << ": " << r.err;
  }
  std::string all = dir / "all";
  fs::create_directories(all);
  auto whole = laptop.yonder_json({"cp", id + ":.", all});
  EXPECT_EQ(read_file(all + "/out.txt"), "hi\n");
  EXPECT_EQ(read_file(all + "/d/ok.txt"), "inner\n");
  for (const char* link : {"leak", "leak2", "d/etcdir", "evil", "inbox2/x.txt"}) {
    EXPECT_FALSE(fs::exists(fs::symlink_status(all + "/" + link))) << link << " " << whole.dump();
  }
  std::string fetched = all_content(all) + all_content(dest);
  EXPECT_EQ(fetched.find("host secret"), std::string::npos);
  if (!hostname.empty()) {
    EXPECT_EQ(fetched.find(hostname), std::string::npos);
  }

  // Into the running job: never through the links it planted...
  std::string local = dir / "local";
  fs::create_directories(local + "/sub");
  std::ofstream(local + "/x.txt") << "replaced the link\n";
  std::ofstream(local + "/in.txt") << "from the consumer\n";
  std::ofstream(local + "/sub/deep.txt") << "deep\n";
  auto through = laptop.yonder({"cp", local + "/sub", id + ":evil"});
  EXPECT_NE(through.exit_code, 0);
  EXPECT_NE(through.err.find("symbolic link"), std::string::npos) << through.err;
  EXPECT_TRUE(fs::is_empty(host_dir));
  // ...a link as the file's own name is replaced, not written through...
  auto over = laptop.yonder({"cp", local + "/x.txt", id + ":inbox2"});
  EXPECT_EQ(over.exit_code, 0) << over.err;
  EXPECT_EQ(over.out, "inbox2/x.txt\n");
  EXPECT_EQ(read_file(host_file), "host secret\n");
  // ...a folder with what is in it...
  auto folder = laptop.yonder_json({"cp", local + "/sub", id + ":nested/deeper"});
  EXPECT_EQ(folder["files"], 1) << folder.dump();
  EXPECT_EQ(folder["paths"], json::array({"nested/deeper/sub/deep.txt"})) << folder.dump();
  // ...and the file the job waits for, owned by the job's user.
  auto in = laptop.yonder({"cp", local + "/in.txt", id + ":inbox"});
  EXPECT_EQ(in.exit_code, 0) << in.err;
  EXPECT_EQ(in.out, "inbox/in.txt\n");

  auto logs = laptop.yonder({"logs", "-f", id});
  EXPECT_NE(logs.out.find("from the consumer\nreplaced the link\nowner 65534:65534\nowner 65534:65534\nappended\n"),
            std::string::npos)
      << logs.out << logs.err;
  EXPECT_EQ(read_file(host_file), "host secret\n");
  EXPECT_TRUE(fs::is_empty(host_dir));

  // Ended: copying out still works (the workspace image is mounted for it),
  // copying in does not.
  std::string after = dir / "after";
  fs::create_directories(after);
  auto ended = laptop.yonder({"cp", id + ":inbox/in.txt", after});
  EXPECT_EQ(ended.exit_code, 0) << ended.err;
  EXPECT_EQ(read_file(after + "/inbox/in.txt"), "from the consumer\nmore\n");
  auto late = laptop.yonder({"cp", local + "/in.txt", id + ":inbox"});
  EXPECT_NE(late.exit_code, 0);
  EXPECT_NE(late.err.find("running job only"), std::string::npos) << late.err;

  // Audited with the bytes, both ways.
  EXPECT_FALSE(wait_for_audit(studio, "files.put", id, [](const json& e) {
                 return e["detail"].value("bytes_in", 0) == 18 && e["detail"].value("dir", "") == "inbox";
               }).is_null());
  EXPECT_FALSE(wait_for_audit(studio, "run.fetch", id, [](const json& e) {
                 return e["detail"].value("bytes_out", 0) == 3;
               }).is_null());
  EXPECT_FALSE(wait_for_audit(studio, "run.fetch", id, [](const json& e) {
                 return e["detail"].contains("refused") &&
                        e["detail"]["refused"].get<std::string>().find("symbolic link") != std::string::npos;
               }).is_null());
}

TEST_F(Files, CpTakesDockersFormsAFileToAFileNameStandardOutputStandardInputAndWorkspacePaths) {
  TempDir dir;
  Node studio(dir, "studio", true), laptop(dir, "laptop", false);
  laptop.pair_with(studio, {"--scope", "run,files"});
  std::string script =
      "printf '{\"loss\": 0.25}\\n' > metrics.json && mkdir results && echo a > results/a && echo b > results/b && "
      "echo ready; i=0; while [ ! -f inbox/data.csv ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; "
      "cat inbox/data.csv; echo got-it; sleep 60";
  auto d = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "-d", "--", "sh", "-c", script});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  std::string id = d.out.substr(0, d.out.find('\n'));
  ASSERT_TRUE(wait_for_output(laptop, id, "ready")) << laptop.yonder({"logs", id}).out;

  // A file to a file name, by docker's absolute path in the job.
  std::string m = dir / "m.json";
  auto to_file = laptop.yonder({"cp", id + ":/workspace/metrics.json", m});
  ASSERT_EQ(to_file.exit_code, 0) << to_file.err;
  EXPECT_EQ(read_file(m), "{\"loss\": 0.25}\n");
  std::ofstream(m) << "old";
  ASSERT_EQ(laptop.yonder({"cp", id + ":metrics.json", m}).exit_code, 0);  // replaces it
  EXPECT_EQ(read_file(m), "{\"loss\": 0.25}\n");
  for (const auto& e : fs::directory_iterator(dir.path())) {  // no staging folder left behind
    EXPECT_EQ(e.path().filename().string().rfind(".yonder-cp-", 0), std::string::npos) << e.path();
  }
  // To standard output: the bytes alone.
  auto to_stdout = laptop.yonder({"cp", id + ":metrics.json", "-"});
  ASSERT_EQ(to_stdout.exit_code, 0) << to_stdout.err;
  EXPECT_EQ(to_stdout.out, "{\"loss\": 0.25}\n");
  // A folder is not a file.
  for (const std::string& where : {m, std::string("-")}) {
    auto folder = laptop.yonder({"cp", id + ":results", where});
    EXPECT_NE(folder.exit_code, 0) << where;
    EXPECT_NE(folder.err.find("is a folder in the job"), std::string::npos) << folder.err;
  }
  EXPECT_EQ(read_file(m), "{\"loss\": 0.25}\n");  // left as it was
  // A folder into a folder, by its absolute path.
  std::string all = dir / "all";
  fs::create_directories(all);
  ASSERT_EQ(laptop.yonder({"cp", id + ":/workspace/results", all}).exit_code, 0);
  EXPECT_EQ(read_file(all + "/results/b"), "b\n");
  auto outside = laptop.yonder({"cp", id + ":/etc/passwd", all});
  EXPECT_NE(outside.exit_code, 0);
  EXPECT_NE(outside.err.find("only /workspace"), std::string::npos) << outside.err;
  auto no_folder = laptop.yonder({"cp", id + ":metrics.json", dir / "missing/m.json"});
  EXPECT_NE(no_folder.exit_code, 0);
  EXPECT_NE(no_folder.err.find("mkdir -p"), std::string::npos) << no_folder.err;
  // Standard input into the job, as the file named.
  auto from_stdin = laptop.yonder({"cp", "-", id + ":/workspace/inbox/data.csv"}, "x,y\n1,2\n");
  ASSERT_EQ(from_stdin.exit_code, 0) << from_stdin.err;
  EXPECT_EQ(from_stdin.out, "inbox/data.csv\n");
  ASSERT_TRUE(wait_for_output(laptop, id, "got-it")) << laptop.yonder({"logs", id}).out;
  EXPECT_NE(laptop.yonder({"logs", id}).out.find("x,y\n1,2\ngot-it"), std::string::npos);
  auto unnamed = laptop.yonder({"cp", "-", id + ":"}, "data");
  EXPECT_NE(unnamed.exit_code, 0);
  EXPECT_NE(unnamed.err.find("name it"), std::string::npos) << unnamed.err;
  EXPECT_EQ(laptop.yonder({"stop", id}).exit_code, 0);
}

TEST_F(Files, CpIntoAJobNeedsTheFilesCapability) {
  TempDir dir;
  Node studio(dir, "studio", true), laptop(dir, "laptop", false);
  laptop.pair_with(studio, {"--scope", "run"});
  auto d = laptop.yonder(
      {"run", "--on", "studio", "--image", kImage, "--no-upload", "-d", "--", "sh", "-c", "echo ready; sleep 60"});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  std::string id = d.out.substr(0, d.out.find('\n'));
  ASSERT_TRUE(wait_for_output(laptop, id, "ready"));
  std::string local = dir / "f.txt";
  std::ofstream(local) << "x\n";
  auto r = laptop.yonder({"cp", local, id + ":"});
  EXPECT_EQ(r.exit_code, 5) << r.err;  // refused by the peer's scope
  EXPECT_NE(r.err.find("does not include \"files\""), std::string::npos) << r.err;
  EXPECT_FALSE(wait_for_audit(studio, "files.put", "", [](const json& e) {
                 return e["detail"].value("refused", "").find("\"files\"") != std::string::npos;
               }).is_null());
  auto usage = laptop.yonder({"cp", local, dir / "elsewhere"});
  EXPECT_EQ(usage.exit_code, 2) << usage.err;
  EXPECT_EQ(laptop.yonder({"stop", id}).exit_code, 0);
}

// A job's outputs shaped by a provider that wants to fill the consumer's disk.
using OutputsHome = Files;

TEST_F(OutputsHome, ASparseFileComesHomeAsHolesNotData) {
  TempDir dir;
  Node studio(dir, "studio", true), laptop(dir, "laptop", false);
  laptop.pair_with(studio, {"--max-jobs", "2"});
  std::string work = dir / "work";
  fs::create_directories(work);
  // 3 GiB of size, one 4 KiB block of data at its end.
  auto r = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--upload", work, "--", "sh", "-c",
                          "dd if=/dev/zero of=big bs=4096 count=1 seek=786431 2>/dev/null && ls -ls big"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  struct stat st {};
  ASSERT_EQ(::stat((work + "/big").c_str(), &st), 0) << r.err;
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), 3ull << 30);
  EXPECT_LE(static_cast<uint64_t>(st.st_blocks) * 512, 1u << 20) << "3 GiB of size landed as data: " << r.out;
}

TEST_F(OutputsHome, MoreFilesThanTheCapAreRefusedBeforeAnythingIsWritten) {
  TempDir dir;
  Node studio(dir, "studio", true);
  Node laptop(dir, "laptop", false, {}, "[outputs]\nmax_files = 5\n");
  laptop.pair_with(studio, {"--max-jobs", "4"});
  std::string script = "mkdir many && for i in $(seq 1 20); do echo $i > many/f$i; done";
  std::string work = dir / "work";
  fs::create_directories(work);
  auto r = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--upload", work, "--", "sh", "-c", script});
  EXPECT_NE(r.exit_code, 0) << r.err;  // not a terminal: refused, not asked
  for (const char* needle : {"20 file(s)", "5 files", "outputs.max_files", "--no-outputs-limit", "nothing was written"}) {
    EXPECT_NE(r.err.find(needle), std::string::npos) << needle << ": " << r.err;
  }
  EXPECT_FALSE(fs::exists(work + "/many"));
  for (const auto& e : fs::directory_iterator(work)) ADD_FAILURE() << "written anyway: " << e.path();

  // The flag lifts the cap, and so does --out naming what to bring.
  auto lifted = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--upload", work, "--no-outputs-limit",
                               "--", "sh", "-c", script});
  ASSERT_EQ(lifted.exit_code, 0) << lifted.err;
  EXPECT_EQ(read_file(work + "/many/f20"), "20\n");
  std::string named = dir / "named";
  fs::create_directories(named);
  auto out = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--upload", named, "--out", "many", "--",
                            "sh", "-c", script});
  ASSERT_EQ(out.exit_code, 0) << out.err;
  EXPECT_EQ(read_file(named + "/many/f7"), "7\n");
}

// `yonder cp --dry-run` shows what a copy out of a job would bring (new
// files, files it would replace here) and writes nothing at all.
TEST_F(OutputsHome, ADryRunCopyListsWhatWouldComeHomeAndWritesNothing) {
  TempDir dir;
  Node studio(dir, "studio", true), laptop(dir, "laptop", false);
  laptop.pair_with(studio, {"--max-jobs", "2"});
  auto d = laptop.yonder({"run", "--on", "studio", "--image", kImage, "--no-upload", "-d", "--", "sh", "-c",
                          "mkdir -p out && echo fresh > out/new.txt && echo theirs > out/mine.txt"});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  std::string id = d.out.substr(0, d.out.find('\n'));
  ASSERT_EQ(laptop.yonder({"logs", "-f", id}).exit_code, 0);  // follows until the job ends
  std::string here = dir / "here";
  fs::create_directories(here + "/out");
  std::ofstream(here + "/out/mine.txt") << "ours\n";
  auto preview = laptop.yonder({"cp", "--dry-run", id + ":out", here});
  ASSERT_EQ(preview.exit_code, 0) << preview.err;
  EXPECT_NE(preview.out.find("replace  out/mine.txt"), std::string::npos) << preview.out;
  EXPECT_NE(preview.out.find("new      out/new.txt"), std::string::npos) << preview.out;
  EXPECT_NE(preview.err.find("nothing was written"), std::string::npos) << preview.err;
  EXPECT_EQ(read_file(here + "/out/mine.txt"), "ours\n");
  EXPECT_FALSE(fs::exists(here + "/out/new.txt"));
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(here)) left.push_back(e.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{"out"}) << "the dry run left files behind";
  // The same copy for real does what the preview said.
  auto real = laptop.yonder({"cp", id + ":out", here});
  ASSERT_EQ(real.exit_code, 0) << real.err;
  EXPECT_EQ(read_file(here + "/out/mine.txt"), "theirs\n");
  EXPECT_EQ(read_file(here + "/out/new.txt"), "fresh\n");
}

}  // namespace
}  // namespace yonder::testing

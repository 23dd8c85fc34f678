// The README's walk-through ("Two people, two machines") run as written,
// through /bin/sh, against two real daemons on loopback and the real
// dockerd: Ana's block on the provider, Ben's on the laptop, line by line,
// with `yonder` on the PATH. What cannot run here is replaced, and only
// that (kReplacements below): the PyTorch image and its programs (no GPU,
// no registry: the test image and a shell stand in, with fake GPUs), the
// share link Ana sends, the laptop's fixed port 8888, and `logs -f` (which
// follows until Ctrl-C). Every other line, flags included, runs as the
// README prints it; a line this test does not know fails it, so the README
// and this test change together.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "support/docker_env.h"
#include "support/job_node.h"
#include "support/read_file.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"
#include "support/wait_until.h"

namespace yonder::testing {
namespace {

// The ```sh blocks of the README's section `title`, each as its command
// lines: continuation lines joined, comments and blank lines left out.
std::vector<std::vector<std::string>> shell_blocks(const std::string& readme, const std::string& title) {
  std::vector<std::vector<std::string>> blocks;
  size_t at = readme.find("\n## " + title + "\n");
  if (at == std::string::npos) return blocks;
  size_t end = readme.find("\n## ", at + 4);
  std::istringstream in(readme.substr(at, end == std::string::npos ? std::string::npos : end - at));
  bool inside = false;
  std::string pending;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("```")) {
      inside = line == "```sh";
      if (inside) blocks.emplace_back();
      continue;
    }
    if (!inside) continue;
    // A comment starts at " #" (the walk-through quotes no '#').
    size_t hash = line.find(" #");
    if (hash != std::string::npos) line = line.substr(0, hash);
    if (line.starts_with("#")) line.clear();
    while (!line.empty() && line.back() == ' ') line.pop_back();
    bool continues = !line.empty() && line.back() == '\\';
    if (continues) line.pop_back();
    size_t first = line.find_first_not_of(' ');
    pending += first == std::string::npos ? "" : (pending.empty() ? "" : " ") + line.substr(first);
    if (!continues && !pending.empty()) {
      while (pending.find("  ") != std::string::npos) pending.replace(pending.find("  "), 2, " ");
      blocks.back().push_back(pending);
      pending.clear();
    }
  }
  return blocks;
}

// What stands in for what cannot run here.
const std::string kPytorch = "pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime";
// The notebook: prints a token and answers HTTP on 8888 until stopped,
// with a results folder to copy home. No single quotes: the README's line
// puts it inside sh -c '...'.
const std::string kNotebook =
    "mkdir -p results && echo 0.93 > results/accuracy.txt && echo \"token=walkthrough\" && "
    "while true; do printf \"HTTP/1.0 200 OK\\r\\n\\r\\njupyter here\\n\" | nc -l -p 8888; done";
struct Replacement {
  std::string from, to;
};
std::vector<Replacement> replacements(const std::string& link) {
  return {
      {"'yonder://...'", "'" + link + "'"},
      {kPytorch, kTestImage},
      {"--memory 16G", "--memory 64M"},  // the test provider's jobs are small
      {"-- python train.py", "-- sh -c 'mkdir -p results && echo loss 0.12 > results/metrics.txt && echo epoch 1 done'"},
      {"-- sh -c 'pip install jupyterlab && jupyter lab --ip 0.0.0.0 --no-browser --allow-root'",
       "-- sh -c '" + kNotebook + "'"},
      {"yonder logs -f nb", "yonder logs nb"},
      {"yonder forward nb 8888:8888", "yonder forward nb 0:8888"},
  };
}

std::string replaced(std::string line, const std::vector<Replacement>& with) {
  for (const auto& r : with) {
    for (size_t at = line.find(r.from); at != std::string::npos; at = line.find(r.from, at + r.to.size())) {
      line.replace(at, r.from.size(), r.to);
    }
  }
  return line;
}

// GET / on 127.0.0.1:port; the answer's bytes ("" when it could not connect).
std::string http_get(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string got;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    std::string req = "GET / HTTP/1.0\r\n\r\n";
    if (::write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
      char buf[512];
      for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  return got;
}

class ReadmeWalkthrough : public ::testing::Test {
 protected:
  void SetUp() override { YONDER_REQUIRE_DOCKER_OR_SKIP(); }
};

TEST_F(ReadmeWalkthrough, AnaSharesBenPairsRunsANotebookForwardsCopiesAndStops) {
  std::string readme = read_file(std::string(std::getenv("YONDER_SOURCE_DIR")) + "/README.md");
  auto blocks = shell_blocks(readme, "Two people, two machines");
  ASSERT_EQ(blocks.size(), 2u) << "the walk-through has Ana's block and Ben's";
  const auto& ana = blocks[0];
  const auto& ben = blocks[1];

  TempDir dir;
  // The daemons the first line of each block starts (`yonder init --name X && yonderd &`).
  Node studio(dir, "studio", true,
              {{"YONDER_GPU_FAKE_WITHOUT_RUNTIME", "true"}, {"YONDER_GPU_INVENTORY", "fake:1"}});
  Node laptop(dir, "laptop", false);
  ASSERT_EQ(ana.front(), "yonder init --name studio && yonderd &");
  ASSERT_EQ(ben.front(), "yonder init --name laptop && yonderd &");
  std::string bin = std::filesystem::path(program_path("yonder")).parent_path().string();
  auto shell_env = [&](const Node& n) {
    Env e = n.env();
    e["PATH"] = bin + ":/usr/bin:/bin";
    return e;
  };
  std::string project = dir / "my-model";  // Ben's project folder (`cd ~/my-model`)
  std::filesystem::create_directories(project);
  std::ofstream(project + "/train.py") << "print('training')\n";

  // Ana's lines, `share --wait` in the background: it waits for Ben's pair.
  std::string link;
  std::unique_ptr<BackgroundProcess> share;
  std::string share_out = dir / "share.out";
  for (size_t i = 1; i < ana.size(); ++i) {
    const std::string& line = ana[i];
    SCOPED_TRACE("Ana: " + line);
    if (line.starts_with("yonder share ")) {
      ASSERT_NE(line.find("--wait"), std::string::npos);
      share = std::make_unique<BackgroundProcess>(
          std::vector<std::string>{"/bin/sh", "-c", line + " > " + share_out + " 2>&1"}, shell_env(studio));
      std::smatch m;
      ASSERT_TRUE(wait_until([&] {
        std::string out = read_file(share_out);
        if (!std::regex_search(out, m, std::regex("yonder://[A-Za-z0-9+/=_.~-]+"))) return false;
        link = m.str();
        return true;
      }, std::chrono::seconds(60))) << read_file(share_out);
    } else if (line == "yonder doctor") {
      // Fake GPUs without the NVIDIA runtime fail its GPU checks, each with its fix.
      auto r = run({"/bin/sh", "-c", line}, shell_env(studio));
      EXPECT_NE(r.out.find("Docker"), std::string::npos) << r.out << r.err;
    } else {
      FAIL() << "a line of Ana's this test does not know; teach it, or put the README back";
    }
  }
  ASSERT_FALSE(link.empty());

  // Ben's lines, in his project folder, each as the README prints it.
  auto with = replacements(link);
  int forward_port = 0;
  for (size_t i = 1; i < ben.size(); ++i) {
    std::string line = replaced(ben[i], with);
    SCOPED_TRACE("Ben: " + ben[i]);
    if (line == "cd ~/my-model") continue;  // each line below runs in `project`
    auto r = run({"/bin/sh", "-c", "cd '" + project + "' && " + line}, shell_env(laptop));
    ASSERT_EQ(r.exit_code, 0) << line << "\nstdout:\n" << r.out << "\nstderr:\n" << r.err;
    if (line.starts_with("yonder pair ")) {
      EXPECT_NE(r.out.find("check"), std::string::npos) << r.out;
      // Ana's `share --wait` ends: Ben paired, with the same check digits.
      auto shared = share->wait();
      EXPECT_EQ(shared.exit_code, 0);
      std::string said = read_file(share_out);
      EXPECT_NE(said.find("Paired with \"laptop\""), std::string::npos) << said;
      std::smatch digits;
      ASSERT_TRUE(std::regex_search(r.out, digits, std::regex("\\d{3} \\d{3} \\d{3}"))) << r.out;
      EXPECT_NE(said.find(digits.str()), std::string::npos) << "the same check digits on both sides:\n" << said;
    } else if (line.starts_with("yonder gpu studio")) {
      EXPECT_NE(r.out.find("FAKE"), std::string::npos) << "her GPU:\n" << r.out;
    } else if (line.starts_with("yonder run --on studio --name train")) {
      EXPECT_NE(r.out.find("epoch 1 done"), std::string::npos) << "the output streams:\n" << r.out;
      EXPECT_EQ(read_file(project + "/results/metrics.txt"), "loss 0.12\n") << "the outputs come home";
    } else if (line.starts_with("yonder logs nb")) {
      // The notebook may still be starting: its token shows once it prints it.
      std::string logs = r.out;
      ASSERT_TRUE(wait_until([&] {
        logs = run({"/bin/sh", "-c", line}, shell_env(laptop)).out;
        return logs.find("token=walkthrough") != std::string::npos;
      }, std::chrono::seconds(60))) << logs;
    } else if (line.starts_with("yonder forward nb")) {
      std::smatch port;
      std::string said = r.out + r.err;  // "forwarding 127.0.0.1:PORT to port 8888 of job ..."
      ASSERT_TRUE(std::regex_search(said, port, std::regex("127\\.0\\.0\\.1:(\\d+)"))) << said;
      forward_port = std::stoi(port[1]);
      std::string page;
      EXPECT_TRUE(wait_until([&] {
        page = http_get(forward_port);
        return page.find("jupyter here") != std::string::npos;
      }, std::chrono::seconds(60))) << "the notebook through the forward: " << page;
    } else if (line.starts_with("yonder cp nb:/workspace/results .")) {
      EXPECT_EQ(read_file(project + "/results/accuracy.txt"), "0.93\n") << "copied home";
      // `stop` asked; the job is `stopping` through its grace period, then stopped.
      nlohmann::json ps;
      EXPECT_TRUE(wait_until([&] {
        ps = nlohmann::json::parse(run({"/bin/sh", "-c", "yonder ps --all --json"}, shell_env(laptop)).out, nullptr,
                                   false);
        bool stopped = false;
        for (const auto& j : ps.value("jobs", nlohmann::json::array())) {
          if (j.value("name", "") == "nb") stopped = j.value("state", "") == "stopped";
        }
        return stopped;
      }, std::chrono::seconds(60))) << "the notebook stopped: " << ps.dump();
    } else if (!line.starts_with("yonder run --on studio -d --name nb")) {
      FAIL() << "a line of Ben's this test does not know; teach it, or put the README back: " << line;
    }
  }
  EXPECT_GT(forward_port, 0) << "the walk-through forwards the notebook";
}

}  // namespace
}  // namespace yonder::testing

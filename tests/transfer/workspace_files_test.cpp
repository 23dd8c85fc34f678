#include "transfer/workspace_files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "support/temp_dir.h"

namespace yonder::transfer {
namespace {

namespace fs = std::filesystem;

void files_write(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}

std::string files_read(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The whole archive of `paths` under `root`.
Bytes pack(const std::string& root, const std::vector<std::string>& paths, WorkspaceSelection* listed = nullptr) {
  auto r = FolderRoot::open(root);
  EXPECT_TRUE(r.ok());
  auto sel = select_beneath(*r, paths, {}, ArchiveLimits{});
  EXPECT_TRUE(sel.ok()) << sel.error().to_string();
  if (listed != nullptr) *listed = *sel;
  BeneathPacker packer(std::move(*r), std::move(*sel), ArchiveLimits{});
  Bytes all;
  while (true) {
    auto chunk = packer.next(7);  // small chunks: every split of the stream
    EXPECT_TRUE(chunk.ok());
    if (!chunk.ok() || chunk->empty()) break;
    all.insert(all.end(), chunk->begin(), chunk->end());
  }
  return all;
}

TEST(WorkspaceFiles, SelectionSkipsLinksAndRefusesThemByName) {
  testing::TempDir dir;
  std::string ws = dir / "ws";
  files_write(ws + "/a.txt", "a\n");
  files_write(ws + "/sub/b.txt", "bb\n");
  files_write(dir / "outside/secret", "secret\n");
  ASSERT_EQ(::symlink((dir / "outside/secret").c_str(), (ws + "/leak").c_str()), 0);
  ASSERT_EQ(::symlink((dir / "outside").c_str(), (ws + "/sub/out").c_str()), 0);
  ASSERT_EQ(::mkfifo((ws + "/fifo").c_str(), 0600), 0);
  auto root = FolderRoot::open(ws);
  ASSERT_TRUE(root.ok());

  auto all = select_beneath(*root, {}, {}, ArchiveLimits{});
  ASSERT_TRUE(all.ok()) << all.error().to_string();
  std::vector<std::string> paths;
  for (const auto& e : all->entries) paths.push_back(e.path);
  EXPECT_EQ(paths, (std::vector<std::string>{"a.txt", "sub", "sub/b.txt"}));
  EXPECT_EQ(all->files, 2u);
  EXPECT_EQ(all->bytes, 5u);
  EXPECT_EQ(all->skipped, 3u);  // leak, sub/out, fifo

  for (const char* link : {"leak", "sub/out", "sub/out/secret"}) {
    auto r = select_beneath(*root, {link}, {}, ArchiveLimits{});
    ASSERT_FALSE(r.ok()) << link;
    EXPECT_EQ(r.error().code(), ErrorCode::kPermissionDenied) << link;
    EXPECT_NE(r.error().message().find("symbolic link"), std::string::npos) << r.error().message();
  }
  EXPECT_EQ(select_beneath(*root, {"nope"}, {}, ArchiveLimits{}).error().code(), ErrorCode::kNotFound);

  HaveManifest have;
  have["a.txt"] = {2, *sha256_file(ws + "/a.txt")};
  auto changed = select_beneath(*root, {}, have, ArchiveLimits{});
  ASSERT_TRUE(changed.ok());
  EXPECT_EQ(changed->files, 1u);
  ArchiveLimits tiny;
  tiny.max_bytes = 2;
  EXPECT_EQ(select_beneath(*root, {}, {}, tiny).error().code(), ErrorCode::kResourceExhausted);
}

TEST(WorkspaceFiles, AFileSwappedForALinkAfterTheListingIsNotRead) {
  testing::TempDir dir;
  std::string ws = dir / "ws";
  files_write(ws + "/data.txt", "mine\n");
  files_write(dir / "secret", "host secret\n");
  auto root = FolderRoot::open(ws);
  ASSERT_TRUE(root.ok());
  auto sel = select_beneath(*root, {}, {}, ArchiveLimits{});
  ASSERT_TRUE(sel.ok());
  // The job replaces its file by a link between our listing and our read.
  fs::remove(ws + "/data.txt");
  ASSERT_EQ(::symlink((dir / "secret").c_str(), (ws + "/data.txt").c_str()), 0);
  BeneathPacker packer(std::move(*root), std::move(*sel), ArchiveLimits{});
  std::string stream;
  while (true) {
    auto chunk = packer.next(1 << 16);
    ASSERT_TRUE(chunk.ok()) << chunk.error().to_string();
    if (chunk->empty()) break;
    stream.append(chunk->begin(), chunk->end());
  }
  EXPECT_EQ(stream.find("host secret"), std::string::npos);
  EXPECT_EQ(packer.sent_files(), 0u);
}

TEST(WorkspaceFiles, WriterReplacesLinksAndNeverWritesThroughThem) {
  testing::TempDir dir;
  std::string src = dir / "src", ws = dir / "ws", outside = dir / "outside";
  files_write(src + "/in/x.txt", "new x\n");
  files_write(src + "/in/deep/y.txt", "y\n");
  fs::create_directories(ws + "/dst/in");
  fs::create_directories(outside);
  files_write(dir / "target.txt", "untouched\n");
  // Planted by the job: a link as a file's name, and a link as a folder.
  ASSERT_EQ(::symlink((dir / "target.txt").c_str(), (ws + "/dst/in/x.txt").c_str()), 0);
  ASSERT_EQ(::symlink(outside.c_str(), (ws + "/evil").c_str()), 0);

  Bytes archive = pack(src, {"in"});
  auto root = FolderRoot::open(ws);
  ASSERT_TRUE(root.ok());
  auto w = BeneathWriter::create(std::move(*root), "dst", ArchiveLimits{});
  ASSERT_TRUE(w.ok()) << w.error().to_string();
  for (size_t at = 0; at < archive.size(); at += 5) {  // every split
    ASSERT_TRUE((*w)->write(ByteView(archive).subspan(at, std::min<size_t>(5, archive.size() - at))).ok());
  }
  auto done = (*w)->finish();
  ASSERT_TRUE(done.ok()) << done.error().to_string();
  EXPECT_EQ((*done)["files"], 2);
  EXPECT_EQ((*done)["paths"], nlohmann::json::array({"dst/in/deep/y.txt", "dst/in/x.txt"}));  // map order
  EXPECT_EQ(files_read(ws + "/dst/in/x.txt"), "new x\n");
  EXPECT_FALSE(fs::is_symlink(ws + "/dst/in/x.txt"));
  EXPECT_EQ(files_read(ws + "/dst/in/deep/y.txt"), "y\n");
  EXPECT_EQ(files_read(dir / "target.txt"), "untouched\n");
  struct stat st {};
  ASSERT_EQ(::stat((ws + "/dst/in/x.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, ::getuid());  // the folder's owner (here: us)

  // Into a link (or through one): refused, nothing written outside.
  auto root2 = FolderRoot::open(ws);
  ASSERT_TRUE(root2.ok());
  auto through = BeneathWriter::create(std::move(*root2), "evil/sub", ArchiveLimits{});
  EXPECT_FALSE(through.ok());
  EXPECT_TRUE(fs::is_empty(outside));
  // No leftovers of temporary files.
  for (const auto& e : fs::recursive_directory_iterator(ws)) {
    EXPECT_EQ(e.path().filename().string().rfind(".yonder-cp-", 0), std::string::npos) << e.path();
  }
}

TEST(WorkspaceFiles, AFolderInTheWayIsNotReplacedAndACutShortArchiveLeavesNothing) {
  testing::TempDir dir;
  std::string src = dir / "src", ws = dir / "ws";
  files_write(src + "/f", "file\n");
  fs::create_directories(ws + "/f/inside");
  Bytes archive = pack(src, {"f"});
  auto root = FolderRoot::open(ws);
  ASSERT_TRUE(root.ok());
  auto w = BeneathWriter::create(std::move(*root), "", ArchiveLimits{});
  ASSERT_TRUE(w.ok());
  Status st = (*w)->write(archive);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("it is a folder"), std::string::npos) << st.error().message();
  EXPECT_TRUE(fs::is_directory(ws + "/f/inside"));

  files_write(src + "/g", std::string(1000, 'g'));
  Bytes g = pack(src, {"g"});
  auto root2 = FolderRoot::open(ws);
  ASSERT_TRUE(root2.ok());
  {
    auto w2 = BeneathWriter::create(std::move(*root2), "", ArchiveLimits{});
    ASSERT_TRUE(w2.ok());
    ASSERT_TRUE((*w2)->write(ByteView(g).first(g.size() / 2)).ok());
    EXPECT_FALSE((*w2)->finish().ok());
  }  // dropped mid-file: its temporary file goes with it
  EXPECT_FALSE(fs::exists(ws + "/g"));
  for (const auto& e : fs::directory_iterator(ws)) {
    EXPECT_EQ(e.path().filename().string().rfind(".yonder-cp-", 0), std::string::npos) << e.path();
  }
}

}  // namespace
}  // namespace yonder::transfer

#include "transfer/workspace_files.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "support/temp_dir.h"
#include "transfer/tree_extract.h"

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

// A file of `size` bytes holding `block` bytes of `fill` at each of `at`, holes elsewhere.
void write_sparse(const std::string& path, uint64_t size, const std::vector<uint64_t>& at, size_t block, char fill) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  std::string data(block, fill);
  for (uint64_t off : at) {
    ASSERT_EQ(::pwrite(fd, data.data(), data.size(), static_cast<off_t>(off)), static_cast<ssize_t>(data.size()));
  }
  ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(size)), 0);
  ::close(fd);
}

std::string read_at(const std::string& path, uint64_t off, size_t n) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  std::string out(n, '?');
  ssize_t got = fd < 0 ? -1 : ::pread(fd, out.data(), n, static_cast<off_t>(off));
  if (fd >= 0) ::close(fd);
  out.resize(got < 0 ? 0 : static_cast<size_t>(got));
  return out;
}

struct stat stat_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st;
}

// Packs everything under `ws` (with `limits`) and extracts it into `into`,
// `chunk` bytes at a time; returns the bytes that crossed.
uint64_t pack_into(const std::string& ws, const std::string& into, const ArchiveLimits& limits, size_t chunk,
                   WorkspaceSelection* listed = nullptr) {
  auto root = FolderRoot::open(ws);
  EXPECT_TRUE(root.ok());
  auto sel = select_beneath(*root, {}, {}, limits);
  EXPECT_TRUE(sel.ok()) << sel.error().to_string();
  if (!sel.ok()) return 0;
  if (listed != nullptr) *listed = *sel;
  BeneathPacker packer(std::move(*root), std::move(*sel), limits);
  auto x = TreeExtractor::create(into, limits);
  EXPECT_TRUE(x.ok());
  uint64_t wire = 0;
  while (x.ok()) {
    auto part = packer.next(chunk);
    EXPECT_TRUE(part.ok()) << part.error().to_string();
    if (!part.ok() || part->empty()) break;
    wire += part->size();
    auto st = (*x)->write(*part);
    EXPECT_TRUE(st.ok()) << st.error().to_string();
    if (!st.ok()) break;
  }
  if (x.ok()) {
    auto done = (*x)->finish();
    EXPECT_TRUE(done.ok()) << done.error().to_string();
  }
  return wire;
}

// `dd if=/dev/zero of=big bs=4k count=1 seek=...` in a job: 3 GiB of size,
// one block of data. It must neither cross the link nor land as 3 GiB.
TEST(OutputsHome, ASparseFileComesHomeAsHolesNotData) {
  testing::TempDir dir;
  std::string ws = dir / "ws";
  fs::create_directories(ws);
  constexpr uint64_t kSize = 3ull << 30, kAt = 1ull << 30;
  write_sparse(ws + "/big", kSize, {kAt}, 4096, 'x');
  struct stat there = stat_of(ws + "/big");
  if (static_cast<uint64_t>(there.st_blocks) * 512 >= kSize) GTEST_SKIP() << "this file system keeps no holes";

  ArchiveLimits limits;
  limits.holes = true;
  WorkspaceSelection listed;
  uint64_t wire = pack_into(ws, dir / "home", limits, 256 * 1024, &listed);
  EXPECT_LE(listed.bytes, 1u << 20);  // announced: the data, not the size
  EXPECT_LE(wire, 1u << 20);
  struct stat here = stat_of(dir / "home/big");
  EXPECT_EQ(static_cast<uint64_t>(here.st_size), kSize);
  EXPECT_LE(here.st_blocks, there.st_blocks + 64) << "about as many blocks as on the provider";
  EXPECT_EQ(read_at(dir / "home/big", kAt, 4096), std::string(4096, 'x'));
  EXPECT_EQ(read_at(dir / "home/big", 0, 16), std::string(16, '\0'));
  EXPECT_EQ(read_at(dir / "home/big", kSize - 16, 16), std::string(16, '\0'));
}

TEST(OutputsHome, FilesWithHolesSurviveAnySplitOfTheStreamByteForByte) {
  testing::TempDir dir;
  std::string ws = dir / "ws";
  fs::create_directories(ws + "/sub");
  // Data at the start, in the middle and at the very end; a hole at the end; plain files beside.
  write_sparse(ws + "/a", 1 << 20, {0, 300 * 1024, (1 << 20) - 4096}, 4096, 'a');
  write_sparse(ws + "/sub/b", 2 << 20, {64 * 1024}, 8192, 'b');
  files_write(ws + "/plain.txt", "plain\n");
  ArchiveLimits limits;
  limits.holes = true;
  for (size_t chunk : {size_t{7}, size_t{4096}, size_t{1} << 20}) {
    std::string home = dir / ("home" + std::to_string(chunk));
    pack_into(ws, home, limits, chunk);
    for (const char* f : {"a", "sub/b", "plain.txt"}) {
      EXPECT_EQ(files_read(home + "/" + f), files_read(ws + "/" + f)) << f << " in chunks of " << chunk;
    }
  }
}

TEST(OutputsHome, WithoutHolesAskedForAFileWithHolesGoesAsPlainData) {
  testing::TempDir dir;
  std::string ws = dir / "ws";
  fs::create_directories(ws);
  write_sparse(ws + "/a", 256 * 1024, {4096}, 4096, 'a');
  WorkspaceSelection listed;
  uint64_t wire = pack_into(ws, dir / "home", ArchiveLimits{}, 64 * 1024, &listed);  // a consumer from before holes
  EXPECT_EQ(listed.bytes, 256u * 1024);
  EXPECT_GE(wire, 256u * 1024);
  EXPECT_EQ(files_read(dir / "home/a"), files_read(ws + "/a"));
}

}  // namespace
}  // namespace yonder::transfer

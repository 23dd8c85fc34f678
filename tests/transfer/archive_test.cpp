// The workspace archive: ignore rules, a folder packed and extracted again,
// and the refusals (unsafe paths, limits, a stream cut short).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/temp_dir.h"
#include "transfer/ignore_rules.h"
#include "transfer/tree_extract.h"
#include "transfer/tree_pack.h"

namespace yonder::transfer {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(IgnoreRules, GitignoreBasics) {
  IgnoreRules r;
  r.add("# comment\n*.log\nbuild/\n/top.txt\ndocs/*.pdf\n");
  r.add("!keep.log\n");
  EXPECT_TRUE(r.ignored("a.log", false));
  EXPECT_TRUE(r.ignored("sub/b.log", false));
  EXPECT_FALSE(r.ignored("keep.log", false));
  EXPECT_TRUE(r.ignored("build", true));
  EXPECT_FALSE(r.ignored("build", false));  // a file named build
  EXPECT_TRUE(r.ignored("top.txt", false));
  EXPECT_FALSE(r.ignored("sub/top.txt", false));
  EXPECT_TRUE(r.ignored("docs/a.pdf", false));
  EXPECT_FALSE(r.ignored("docs/x/a.pdf", false));
  EXPECT_TRUE(r.ignored(".git", true));
  EXPECT_FALSE(r.ignored("src/main.cpp", false));
}

TEST(Archive, PackThenExtractReproducesTheFolder) {
  testing::TempDir dir;
  std::string src = dir / "src";
  std::filesystem::create_directories(src + "/a/b");
  std::filesystem::create_directories(src + "/.git/objects");
  std::ofstream(src + "/a/b/c.txt") << "deep\n";
  std::ofstream(src + "/.git/objects/x") << "git\n";
  std::ofstream(src + "/empty");
  std::ofstream(src + "/run.sh") << "#!/bin/sh\n";
  std::filesystem::permissions(src + "/run.sh", std::filesystem::perms::owner_all);
  std::string big(700 * 1024, 'z');
  std::ofstream(src + "/big.bin") << big;
  std::filesystem::create_symlink("/etc/passwd", src + "/link");

  auto listing = list_tree(src, {});
  ASSERT_TRUE(listing.ok()) << listing.error().to_string();
  EXPECT_EQ(listing->files, 4u);
  EXPECT_EQ(listing->skipped, 2u);  // .git and the link
  TreePacker packer(std::move(*listing));
  auto x = TreeExtractor::create(dir / "dst", {});
  ASSERT_TRUE(x.ok());
  while (true) {
    auto chunk = packer.next(100 * 1024);
    ASSERT_TRUE(chunk.ok()) << chunk.error().to_string();
    if (chunk->empty()) break;
    ASSERT_TRUE((*x)->write(*chunk).ok());
  }
  auto done = (*x)->finish();
  ASSERT_TRUE(done.ok()) << done.error().to_string();
  EXPECT_EQ((*done)["files"], 4);
  EXPECT_EQ(slurp(dir / "dst/a/b/c.txt"), "deep\n");
  EXPECT_EQ(slurp(dir / "dst/big.bin"), big);
  EXPECT_TRUE(std::filesystem::exists(dir / "dst/empty"));
  EXPECT_FALSE(std::filesystem::exists(dir / "dst/.git"));
  EXPECT_FALSE(std::filesystem::exists(dir / "dst/link"));
  auto perms = std::filesystem::status(dir / "dst/run.sh").permissions();
  EXPECT_NE(perms & std::filesystem::perms::owner_exec, std::filesystem::perms::none);
}

class Null final : public ArchiveVisitor {
 public:
  Status on_dir(const std::string&, uint32_t) override { return ok_status(); }
  Status on_file_begin(const std::string&, uint32_t, uint64_t) override { return ok_status(); }
  Status on_file_extent(uint64_t) override { return ok_status(); }
  Status on_file_data(ByteView) override { return ok_status(); }
  Status on_file_end() override { return ok_status(); }
};

Bytes archive(std::initializer_list<Bytes> entries) {
  Bytes out(kArchiveMagic.begin(), kArchiveMagic.end());
  for (const auto& e : entries) out.insert(out.end(), e.begin(), e.end());
  return out;
}

TEST(Archive, RefusesUnsafePathsOverLimitAndCutStreams) {
  Null v;
  for (const char* bad : {"../x", "/etc/passwd", "a//b", "a/./b", "a/.."}) {
    ArchiveReader r({});
    auto st = r.feed(archive({encode_entry(EntryType::kDir, 0755, bad, 0)}), v);
    EXPECT_FALSE(st.ok()) << bad;
  }
  ArchiveReader small({10, 100});
  Bytes big = encode_entry(EntryType::kFile, 0644, "f", 11);
  auto st = small.feed(archive({big}), v);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), ErrorCode::kResourceExhausted);
  EXPECT_NE(st.error().message().find(".yonderignore"), std::string::npos);

  testing::TempDir dir;
  auto x = TreeExtractor::create(dir / "cut", {});
  ASSERT_TRUE(x.ok());
  ASSERT_TRUE((*x)->write(archive({encode_entry(EntryType::kDir, 0755, "d", 0)})).ok());
  auto done = (*x)->finish();
  ASSERT_FALSE(done.ok());
  EXPECT_NE(done.error().message().find("cut short"), std::string::npos);
  EXPECT_FALSE(TreeExtractor::create(dir / "cut", {}).ok());  // never into an existing folder
}

Bytes sparse_file(uint64_t size, std::initializer_list<std::pair<uint64_t, uint64_t>> extents) {
  Bytes out = encode_entry(EntryType::kSparse, 0644, "f", size);
  for (auto [off, len] : extents) {
    Bytes e = encode_extent(off, len);
    out.insert(out.end(), e.begin(), e.end());
    out.insert(out.end(), len, static_cast<uint8_t>('x'));
  }
  Bytes end = encode_extent(size, 0);
  out.insert(out.end(), end.begin(), end.end());
  return out;
}

TEST(Archive, FilesWithHolesAreReadOnlyWhereAskedForAndOnlyInOrderWithinTheirSize) {
  Null v;
  ArchiveLimits holes;
  holes.holes = true;
  Bytes good = archive({sparse_file(100, {{10, 5}, {50, 50}}), encode_entry(EntryType::kEnd, 0, {}, 0)});
  ArchiveReader ok_reader(holes);
  EXPECT_TRUE(ok_reader.feed(good, v).ok());
  EXPECT_TRUE(ok_reader.complete());
  EXPECT_EQ(ok_reader.bytes(), 55u);  // data, not the size
  ArchiveReader old_reader({});       // a receiver that did not ask for holes
  EXPECT_FALSE(old_reader.feed(good, v).ok());

  for (auto bad : {sparse_file(100, {{50, 5}, {10, 5}}),   // out of order
                   sparse_file(100, {{10, 20}, {20, 5}}),  // overlapping
                   sparse_file(100, {{90, 11}}),           // past the size
                   sparse_file(100, {{~uint64_t{0} - 2, 3}})}) {
    ArchiveReader r(holes);
    EXPECT_FALSE(r.feed(archive({bad}), v).ok());
  }
  Bytes wrong_end = encode_entry(EntryType::kSparse, 0644, "f", 100);
  Bytes e = encode_extent(99, 0);
  wrong_end.insert(wrong_end.end(), e.begin(), e.end());
  ArchiveReader r(holes);
  EXPECT_FALSE(r.feed(archive({wrong_end}), v).ok());
  ArchiveLimits few = holes;
  few.max_extents_per_file = 1;
  ArchiveReader r2(few);
  EXPECT_FALSE(r2.feed(good, v).ok());
  ArchiveLimits small = holes;
  small.max_bytes = 54;
  ArchiveReader r3(small);
  auto st = r3.feed(good, v);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), ErrorCode::kResourceExhausted);
}

TEST(Archive, MoreFilesThanTheLimitAreRefused) {
  Null v;
  ArchiveLimits limits;
  limits.max_files = 1;
  ArchiveReader r(limits);
  auto st = r.feed(archive({encode_entry(EntryType::kFile, 0644, "a", 0), encode_entry(EntryType::kFile, 0644, "b", 0)}), v);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), ErrorCode::kResourceExhausted);
}

}  // namespace
}  // namespace yonder::transfer

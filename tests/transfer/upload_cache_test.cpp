#include "transfer/upload_cache.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/temp_dir.h"
#include "transfer/manifest.h"
#include "transfer/tree_pack.h"

namespace yonder::transfer {
namespace {

namespace fs = std::filesystem;

void cache_write(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

std::string cache_read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

Manifest manifest_of(const std::string& root, HashCache* cache = nullptr) {
  auto listing = list_tree(root, ArchiveLimits{});
  EXPECT_TRUE(listing.ok());
  auto m = build_manifest(*listing, cache);
  EXPECT_TRUE(m.ok()) << m.error().to_string();
  return *m;
}

// What the consumer sends for `plan`: the needed files of `root`, resumed
// where the plan says.
Bytes data_for(const std::string& root, const Manifest& m, const nlohmann::json& plan_json) {
  auto reply = parse_plan_reply(plan_json, m);
  EXPECT_TRUE(reply.ok()) << reply.error().to_string();
  TreeListing l;
  l.root = root;
  size_t i = 0;
  for (const auto& e : m.entries) {
    if (e.dir) continue;
    if (reply->need[i]) {
      TreeEntry t{e.path, false, e.mode, e.size};
      auto r = reply->resume.find(i);
      if (r != reply->resume.end()) t.offset = r->second;
      l.entries.push_back(t);
    }
    ++i;
  }
  TreePacker p(std::move(l));
  Bytes all;
  while (true) {
    auto c = p.next(1 << 16);
    EXPECT_TRUE(c.ok());
    if (c->empty()) break;
    all.insert(all.end(), c->begin(), c->end());
  }
  return all;
}

Manifest round_trip(const Manifest& m) {
  ManifestReader r(ArchiveLimits{});
  Bytes wire = encode_manifest(m);
  // Byte by byte for the first part: any split must work.
  size_t head = std::min<size_t>(wire.size(), 300);
  for (size_t i = 0; i < head; ++i) EXPECT_TRUE(r.feed(ByteView(wire.data() + i, 1)).ok());
  EXPECT_TRUE(r.feed(ByteView(wire.data() + head, wire.size() - head)).ok());
  EXPECT_TRUE(r.complete());
  auto out = r.take();
  EXPECT_TRUE(out.ok());
  return *out;
}

TEST(Manifest, RoundTripsAndHashesContent) {
  testing::TempDir dir;
  std::string src = dir / "src";
  cache_write(src + "/a.txt", "hello\n");
  cache_write(src + "/sub/b.bin", std::string(100000, 'x'));
  cache_write(src + "/sub/empty", "");
  Manifest m = manifest_of(src);
  ASSERT_EQ(m.files, 3u);
  EXPECT_EQ(m.bytes, 6u + 100000u);
  Manifest back = round_trip(m);
  ASSERT_EQ(back.entries.size(), m.entries.size());
  for (size_t i = 0; i < m.entries.size(); ++i) {
    EXPECT_EQ(back.entries[i].path, m.entries[i].path);
    EXPECT_EQ(back.entries[i].size, m.entries[i].size);
    EXPECT_EQ(back.entries[i].digest, m.entries[i].digest);
  }
  // sha256("hello\n")
  for (const auto& e : m.entries) {
    if (e.path == "a.txt") {
      EXPECT_EQ(digest_hex(e.digest), "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03");
    }
  }
}

TEST(Manifest, RefusesDuplicatesOrphansAndWrongRecords) {
  Manifest m;
  m.entries.push_back({"a", false, 0644, 1, {}});
  m.entries.push_back({"a", false, 0644, 1, {}});
  ManifestReader dup(ArchiveLimits{});
  EXPECT_FALSE(dup.feed(encode_manifest(m)).ok());

  Manifest orphan;
  orphan.entries.push_back({"d/a", false, 0644, 1, {}});
  ManifestReader o(ArchiveLimits{});
  EXPECT_FALSE(o.feed(encode_manifest(orphan)).ok());

  // A workspace archive is not a manifest: its file content is not a digest record.
  Bytes archive(kArchiveMagic.begin(), kArchiveMagic.end());
  Bytes h = encode_entry(EntryType::kFile, 0644, "a", 3);
  archive.insert(archive.end(), h.begin(), h.end());
  ManifestReader a(ArchiveLimits{});
  EXPECT_FALSE(a.feed(archive).ok());

  Manifest big;
  big.entries.push_back({"a", false, 0644, 1ull << 40, {}});
  ArchiveLimits small;
  small.max_bytes = 1 << 20;
  ManifestReader b(small);
  auto st = b.feed(encode_manifest(big));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), ErrorCode::kResourceExhausted);
}

TEST(HashCache, ReusesDigestsOfUnchangedFilesOnly) {
  testing::TempDir dir;
  std::string src = dir / "src";
  cache_write(src + "/old.txt", "old");
  cache_write(src + "/new.txt", "new");
  // old.txt was last written long ago: its digest may be cached.
  struct timespec times[2] = {{1000000000, 0}, {1000000000, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, (src + "/old.txt").c_str(), times, 0), 0);
  std::string file = dir / "hashes.json";
  {
    HashCache c(file);
    (void)manifest_of(src, &c);
    ASSERT_TRUE(c.save().ok());
  }
  // Change old.txt's content but keep its size and time: the cache answers
  // (that is what the cache is for); bump its time: it is hashed again.
  cache_write(src + "/old.txt", "OLD");
  ASSERT_EQ(::utimensat(AT_FDCWD, (src + "/old.txt").c_str(), times, 0), 0);
  {
    HashCache c(file);
    Digest cached{};
    struct stat st {};
    ASSERT_EQ(::stat((src + "/old.txt").c_str(), &st), 0);
    EXPECT_TRUE(c.lookup(src + "/old.txt", 3, 1000000000ll * 1000000000ll, st.st_ino, cached));
    EXPECT_NE(cached, *hash_file(src + "/old.txt"));  // stale by design, found by size+mtime+inode
    // new.txt was written just now: never cached (racy).
    ASSERT_EQ(::stat((src + "/new.txt").c_str(), &st), 0);
    EXPECT_FALSE(c.lookup(src + "/new.txt", 3, st.st_mtim.tv_sec * 1000000000ll + st.st_mtim.tv_nsec, st.st_ino, cached));
  }
  struct timespec later[2] = {{1000000100, 0}, {1000000100, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, (src + "/old.txt").c_str(), later, 0), 0);
  HashCache c(file);
  Manifest m = manifest_of(src, &c);
  for (const auto& e : m.entries) {
    if (e.path == "old.txt") {
      EXPECT_EQ(e.digest, *hash_file(src + "/old.txt"));
    }
  }
}

TEST(UploadCache, SendsOnlyWhatTheStoreLacks) {
  testing::TempDir dir;
  std::string src = dir / "src";
  cache_write(src + "/model.bin", std::string(300000, 'm'));
  cache_write(src + "/train.py", "print('hi')\n");
  cache_write(src + "/copy.py", "print('hi')\n");  // same content: sent once
  cache_write(src + "/run.sh", "#!/bin/sh\necho hi\n");
  ASSERT_EQ(::chmod((src + "/run.sh").c_str(), 0755), 0);
  cache_write(src + "/empty", "");
  auto cache = UploadCache::open(dir / "cache");

  Manifest m = manifest_of(src);
  auto plan = cache->plan(m);
  ASSERT_TRUE(plan.ok()) << plan.error().to_string();
  EXPECT_EQ((*plan)->need_files(), 3u);  // model.bin, one of the .py, run.sh
  EXPECT_EQ((*plan)->need_bytes(), 300000u + 12u + 18u);
  Bytes data = data_for(src, m, (*plan)->to_json());
  auto rx = cache->receive(**plan);
  ASSERT_TRUE(rx.ok());
  ASSERT_TRUE((*rx)->write(data).ok());
  auto got = (*rx)->finish();
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  EXPECT_EQ((*got)["received_files"], 3);
  rx->reset();
  plan->reset();

  std::string ws = dir / "ws";
  auto made = cache->materialize(m, ws);
  ASSERT_TRUE(made.ok()) << made.error().to_string();
  EXPECT_EQ((*made)["files"], 5);
  EXPECT_EQ(cache_read(ws + "/model.bin"), std::string(300000, 'm'));
  EXPECT_EQ(cache_read(ws + "/copy.py"), "print('hi')\n");
  EXPECT_EQ(cache_read(ws + "/empty"), "");
  struct stat st {};
  ASSERT_EQ(::stat((ws + "/run.sh").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u);

  // The same tree again: nothing to send.
  auto again = cache->plan(m);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->need_files(), 0u);
  EXPECT_EQ((*again)->need_bytes(), 0u);
  auto rx2 = cache->receive(**again);
  ASSERT_TRUE((*rx2)->write(data_for(src, m, (*again)->to_json())).ok());
  EXPECT_TRUE((*rx2)->finish().ok());
}

TEST(UploadCache, ResumesAFileCutShortAndRefusesBytesThatDoNotMatch) {
  testing::TempDir dir;
  std::string src = dir / "src";
  std::string big;
  for (int i = 0; i < 200000; ++i) big += static_cast<char>('a' + i % 26);
  cache_write(src + "/big.bin", big);
  auto cache = UploadCache::open(dir / "cache");
  Manifest m = manifest_of(src);
  {
    auto plan = cache->plan(m);
    Bytes data = data_for(src, m, (*plan)->to_json());
    auto rx = cache->receive(**plan);
    // The link drops after 120000 bytes.
    ASSERT_TRUE((*rx)->write(ByteView(data.data(), 120000)).ok());
  }
  auto plan = cache->plan(m);
  nlohmann::json pj = (*plan)->to_json();
  ASSERT_EQ(pj["resume"].size(), 1u);
  uint64_t have = pj["resume"][0][1];
  EXPECT_GT(have, 100000u);
  EXPECT_EQ((*plan)->need_bytes(), big.size() - have);
  Bytes rest = data_for(src, m, pj);
  EXPECT_LT(rest.size(), big.size() - 100000);
  auto rx = cache->receive(**plan);
  ASSERT_TRUE((*rx)->write(rest).ok());
  ASSERT_TRUE((*rx)->finish().ok());
  rx->reset();
  plan->reset();
  ASSERT_TRUE(cache->materialize(m, dir / "ws").ok());
  EXPECT_EQ(cache_read(dir / "ws/big.bin"), big);

  // A file that changed after it was hashed: refused, nothing stored.
  std::string src2 = dir / "src2";
  cache_write(src2 + "/f.txt", "one");
  Manifest m2 = manifest_of(src2);
  cache_write(src2 + "/f.txt", "two");
  auto p2 = cache->plan(m2);
  auto rx2 = cache->receive(**p2);
  auto st = (*rx2)->write(data_for(src2, m2, (*p2)->to_json()));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("changed while it was being uploaded"), std::string::npos);
  EXPECT_FALSE(fs::exists(cache->object_path(m2.entries[0].digest)));

  // A file the plan did not ask for is refused.
  auto p3 = cache->plan(m);
  auto rx3 = cache->receive(**p3);
  TreeListing extra;
  extra.root = src;
  extra.entries.push_back({"big.bin", false, 0644, big.size()});
  TreePacker packer(std::move(extra));
  auto chunk = packer.next(1 << 20);
  EXPECT_FALSE((*rx3)->write(*chunk).ok());
}

TEST(UploadCache, TrimDropsLeastRecentlyUsedObjects) {
  testing::TempDir dir;
  auto cache = UploadCache::open(dir / "cache");
  std::vector<Manifest> ms;
  for (int i = 0; i < 3; ++i) {
    std::string src = dir / ("src" + std::to_string(i));
    cache_write(src + "/f", std::string(10000, static_cast<char>('a' + i)));
    ms.push_back(manifest_of(src));
    auto plan = cache->plan(ms.back());
    auto rx = cache->receive(**plan);
    ASSERT_TRUE((*rx)->write(data_for(src, ms.back(), (*plan)->to_json())).ok());
    ASSERT_TRUE((*rx)->finish().ok());
    struct timespec t[2] = {{1000000000 + i, 0}, {1000000000 + i, 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, cache->object_path(ms.back().entries[0].digest).c_str(), t, 0), 0);
  }
  auto kept = cache->trim(25000, std::chrono::hours(24));
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(*kept, 20000u);
  EXPECT_FALSE(fs::exists(cache->object_path(ms[0].entries[0].digest)));
  EXPECT_TRUE(fs::exists(cache->object_path(ms[2].entries[0].digest)));
}

TEST(UploadCache, PlanRepliesAreCheckedAgainstTheManifest) {
  Manifest m;
  m.entries.push_back({"a", false, 0644, 10, {}});
  m.files = 1;
  EXPECT_TRUE(parse_plan_reply({{"need", base64_encode(Bytes{1})}}, m).ok());
  EXPECT_FALSE(parse_plan_reply({{"need", base64_encode(Bytes{1, 0})}}, m).ok());
  EXPECT_FALSE(parse_plan_reply({{"need", base64_encode(Bytes{1})}, {"resume", {{0, 10}}}}, m).ok());
  EXPECT_FALSE(parse_plan_reply({{"need", base64_encode(Bytes{0})}, {"resume", {{0, 3}}}}, m).ok());
  EXPECT_TRUE(parse_plan_reply({{"need", base64_encode(Bytes{1})}, {"resume", {{0, 3}}}}, m).ok());
}

}  // namespace
}  // namespace yonder::transfer

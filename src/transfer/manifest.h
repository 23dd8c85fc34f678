// Content-addressed uploads, the consumer's half of the description: what a
// folder holds, by content. A manifest lists the folders and files of a
// listing (tree_pack.h) with each file's size and SHA-256, so a provider can
// answer "send me only these" and an unchanged file is never sent twice.
//
// Wire form: a workspace archive (archive.h) whose entries are the
// listing's, where each file's content is its digest record (u64 size
// big-endian, then the 32-byte SHA-256) instead of its bytes. So the
// manifest shares the archive's path rules, limits and fuzzed reader, and a
// manifest can never be mistaken for a workspace: every "file" in it is 40
// bytes long, which decode_manifest checks.
//
// Digests on the consumer are cached (HashCache) by path, size, mtime and
// inode, so a re-upload of a 1 GiB tree reads nothing it has read before.
//
// Blocking (file reads): worker threads only.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/bytes.h"
#include "base/error.h"
#include "transfer/archive.h"
#include "transfer/tree_pack.h"

namespace yonder::transfer {

using Digest = std::array<uint8_t, 32>;
std::string digest_hex(const Digest& d);

// Incremental SHA-256 (OpenSSL: uses the CPU's SHA extensions where present,
// several times libsodium's portable code).
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(ByteView data);
  Digest final();

 private:
  void* ctx_;  // EVP_MD_CTX
};

// SHA-256 of a regular file (not following a final symbolic link).
// `progress`, if set, is told each chunk's size as it is read.
Result<Digest> hash_file(const std::string& path, const std::function<void(uint64_t)>& progress = {});

struct ManifestEntry {
  std::string path;
  bool dir = false;
  uint32_t mode = 0644;
  uint64_t size = 0;
  Digest digest{};
};

struct Manifest {
  std::vector<ManifestEntry> entries;  // folders before their contents
  uint64_t files = 0;
  uint64_t bytes = 0;  // all files' sizes together
};

// Remembers digests between uploads: path -> (size, mtime, inode, digest).
// An entry whose file was modified within two seconds of hashing is not
// kept (the "racy" case: a later write in the same clock tick would leave
// size and mtime unchanged).
class HashCache {
 public:
  // Loads `file` (missing or unreadable: an empty cache).
  explicit HashCache(std::string file);
  // The cached digest if the file's size, mtime and inode still match.
  bool lookup(const std::string& abs_path, uint64_t size, int64_t mtime_ns, uint64_t ino, Digest& out) const;
  void store(const std::string& abs_path, uint64_t size, int64_t mtime_ns, uint64_t ino, const Digest& d);
  // Writes the entries used or stored since loading (atomically).
  Status save();

 private:
  struct Entry {
    uint64_t size = 0;
    int64_t mtime_ns = 0;
    uint64_t ino = 0;
    Digest digest{};
  };
  std::string file_;
  std::map<std::string, Entry> loaded_;
  mutable std::map<std::string, Entry> used_;
};

// The manifest of a listing, hashing each file (or taking its digest from
// `cache`, which may be null). Files the cache does not know are hashed on
// up to four threads; `hashed` is told the bytes read as it goes, from any
// of them (it must be thread-safe).
Result<Manifest> build_manifest(const TreeListing& listing, HashCache* cache,
                                const std::function<void(uint64_t)>& hashed = {});

// The wire form (see above), in one piece.
Bytes encode_manifest(const Manifest& m);

// Sans-I/O decoder of the wire form: feed bytes in any split. Untrusted
// input: bounded by `limits` (entries; max_bytes bounds the files' sizes
// together), paths checked, a path named twice refused.
class ManifestReader {
 public:
  explicit ManifestReader(ArchiveLimits limits);
  ~ManifestReader();
  Status feed(ByteView in);
  bool complete() const;
  // After complete(): the manifest.
  Result<Manifest> take();

 private:
  class Collector;
  std::unique_ptr<Collector> collector_;
  ArchiveReader reader_;
};

}  // namespace yonder::transfer

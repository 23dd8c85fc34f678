#include "mesh/jobs/mesh_replicas.h"

#include <sodium.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <vector>

#include "base/bytes.h"
#include "os/process.h"

namespace yonder::mesh {
namespace fs = std::filesystem;

namespace {

std::string sha256_hex(const std::string& data) {
  uint8_t out[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(out, reinterpret_cast<const unsigned char*>(data.data()), data.size());
  return hex_encode(ByteView(out, sizeof out));
}

Result<std::string> file_sha256_hex(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::kFailedPrecondition, "cannot read " + path.string());
  crypto_hash_sha256_state st;
  crypto_hash_sha256_init(&st);
  std::vector<char> buf(1 << 16);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    auto n = in.gcount();
    if (n > 0)
      crypto_hash_sha256_update(&st, reinterpret_cast<const unsigned char*>(buf.data()), static_cast<size_t>(n));
  }
  if (in.bad()) return make_error(ErrorCode::kFailedPrecondition, "cannot read " + path.string());
  uint8_t out[crypto_hash_sha256_BYTES];
  crypto_hash_sha256_final(&st, out);
  return hex_encode(ByteView(out, sizeof out));
}

}  // namespace

Result<std::string> replica_digest(const std::string& folder, const std::string& stdout_bytes,
                                   const std::string& stderr_bytes, int exit_code) {
  std::vector<std::string> files;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(folder, fs::directory_options::none, ec), end; it != end; it.increment(ec)) {
    if (ec) break;
    if (it->is_symlink(ec) || !it->is_regular_file(ec)) continue;
    files.push_back(it->path().lexically_relative(folder).generic_string());
  }
  if (ec) return make_error(ErrorCode::kFailedPrecondition, "cannot list " + folder + ": " + ec.message());
  std::sort(files.begin(), files.end());
  std::string text = "yonder-replica-digest-v1\nexit " + std::to_string(exit_code) + "\nstdout " +
                     sha256_hex(stdout_bytes) + "\nstderr " + sha256_hex(stderr_bytes) + "\n";
  for (const auto& f : files) {
    auto h = file_sha256_hex(fs::path(folder) / f);
    if (!h) return std::move(h).error();
    text += "file " + f + " " + *h + "\n";
  }
  return sha256_hex(text);
}

Result<bool> run_validator(const std::string& folder, const std::string& command, std::chrono::milliseconds timeout) {
  auto r = os::run_capture({"/bin/sh", "-c", "cd -- \"$0\" && exec /bin/sh -c \"$1\"", folder, command}, timeout);
  if (!r) return std::move(r).error().with_context("the validator");
  return r->exit_code == 0;
}

}  // namespace yonder::mesh

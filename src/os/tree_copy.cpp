#include "os/tree_copy.h"

#include <unistd.h>

#include <cerrno>
#include <filesystem>

namespace yonder::os {

namespace fs = std::filesystem;

Status copy_tree(const std::string& from, const std::string& to, int uid, int gid) {
  std::error_code ec;
  auto fail = [&](const fs::path& p) {
    ErrorCode code = ec == std::errc::no_space_on_device ? ErrorCode::kResourceExhausted : ErrorCode::kInternal;
    std::string why = code == ErrorCode::kResourceExhausted ? "the files do not fit; ask for more disk" : ec.message();
    return make_error(code, "cannot copy " + p.string() + ": " + why);
  };
  fs::recursive_directory_iterator it(from, fs::directory_options::none, ec), end;
  if (ec) return fail(from);
  for (; it != end; it.increment(ec)) {
    if (ec) return fail(from);
    const fs::path& src = it->path();
    fs::path dst = fs::path(to) / fs::relative(src, from, ec);
    if (ec) return fail(src);
    auto status = it->symlink_status(ec);
    if (ec) return fail(src);
    if (fs::is_directory(status)) {
      fs::create_directory(dst, ec);
      if (ec) return fail(dst);
    } else if (fs::is_regular_file(status)) {
      fs::copy_file(src, dst, fs::copy_options::overwrite_existing, ec);
      if (ec) return fail(dst);
    } else {
      continue;
    }
    fs::permissions(dst, status.permissions() & fs::perms::mask, ec);
    if (ec) return fail(dst);
    if (::lchown(dst.c_str(), static_cast<uid_t>(uid), static_cast<gid_t>(gid)) != 0) {
      ec = std::error_code(errno, std::generic_category());
      return fail(dst);
    }
  }
  return ok_status();
}

}  // namespace yonder::os

#include "transfer/outputs_policy.h"

#include <cstdio>
#include <iterator>

namespace yonder::transfer {
namespace {

// The components of a '/'-separated path.
std::vector<std::string_view> components(std::string_view path) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string_view::npos) slash = path.size();
    if (slash > start) out.push_back(path.substr(start, slash - start));
    start = slash + 1;
  }
  return out;
}

bool is_named(const std::vector<std::string>& named, std::string_view path) {
  for (const auto& n : named) {
    if (n.empty()) continue;  // the whole workspace names nothing in particular
    if (path == n) return true;
    if (path.size() > n.size() && path.compare(0, n.size(), n) == 0 && path[n.size()] == '/') return true;
  }
  return false;
}

std::string plural(uint64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

bool under_git_folder(std::string_view path) {
  for (auto c : components(path)) {
    if (c == ".git") return true;
  }
  return false;
}

OutputDecision OutputsPolicy::decide(std::string_view path, uint32_t mode, bool exists_here) const {
  OutputDecision d;
  d.named = is_named(named, path);
  d.mode = d.named ? ((mode & 0755) | 0600) : 0644;
  if (under_git_folder(path)) {
    d.refusal = OutputRefusal::kGitFolder;
    return d;
  }
  if (d.named) return d;
  auto parts = components(path);
  if (!parts.empty() && (parts.back() == ".gitignore" || parts.back() == ".yonderignore")) {
    d.refusal = OutputRefusal::kIgnoreFile;
    return d;
  }
  // Excluded itself, or under an excluded folder (the upload's walk never
  // went below an excluded folder, so neither does what comes home).
  std::string prefix;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) prefix += '/';
    prefix += parts[i];
    bool is_dir = i + 1 < parts.size();
    if (ignore.ignored(prefix, is_dir)) {
      d.refusal = OutputRefusal::kExcluded;
      return d;
    }
  }
  if (exists_here && (!uploaded || uploaded->count(std::string(path)) == 0)) {
    d.refusal = OutputRefusal::kNotUploaded;
    return d;
  }
  return d;
}

void OutputSkips::count(OutputRefusal r) {
  switch (r) {
    case OutputRefusal::kNone: break;
    case OutputRefusal::kGitFolder: ++git; break;
    case OutputRefusal::kIgnoreFile: ++ignore_files; break;
    case OutputRefusal::kExcluded: ++excluded; break;
    case OutputRefusal::kNotUploaded: ++not_uploaded; break;
  }
}

std::string describe(const OutputSkips& s) {
  std::vector<std::string> parts;
  if (s.git) parts.push_back(plural(s.git, "file under .git", "files under .git"));
  if (s.ignore_files) parts.push_back(plural(s.ignore_files, "ignore file (.gitignore/.yonderignore)", "ignore files (.gitignore/.yonderignore)"));
  if (s.excluded) parts.push_back(plural(s.excluded, "file your ignore rules exclude", "files your ignore rules exclude"));
  if (s.not_uploaded) parts.push_back(plural(s.not_uploaded, "file that would replace one here that was not uploaded", "files that would replace ones here that were not uploaded"));
  if (parts.empty()) return {};
  std::string out = "left out ";
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += ", ";
    out += parts[i];
  }
  return out + " (name them with --out to bring them home; .git never comes home)";
}

namespace {

std::string outputs_size_text(uint64_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  size_t u = 0;
  while (v >= 1024 && u + 1 < std::size(units)) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

}  // namespace

Status check_outputs_fit(uint64_t files, uint64_t bytes, uint64_t free_bytes, const OutputsBudget& budget) {
  std::string what = std::to_string(files) + " file(s), " + outputs_size_text(bytes);
  if (bytes > free_bytes) {
    return make_error(ErrorCode::kResourceExhausted,
                      "the job's files to bring home are " + what + " but the folder they go to has only " +
                          outputs_size_text(free_bytes) + " free; free some space, or fetch less (--out PATH)");
  }
  if (budget.lifted || (files <= budget.max_files && bytes <= budget.max_bytes)) return ok_status();
  return make_error(ErrorCode::kResourceExhausted,
                    "the job's files to bring home are " + what + ", more than this node takes without asking (" +
                        std::to_string(budget.max_files) + " files, " + outputs_size_text(budget.max_bytes) +
                        ": settings outputs.max_files and outputs.max_mib); nothing was written. Bring them home with " +
                        std::string(kOutputsLimitFlag) + " (or `yonder cp JOB:. DIR`), name what you want with --out PATH, "
                        "or raise the settings (`yonder config set outputs.max_files N`)");
}

bool is_over_outputs_budget(const Error& e) {
  return e.code() == ErrorCode::kResourceExhausted && e.message().find(kOutputsLimitFlag) != std::string::npos;
}

}  // namespace yonder::transfer

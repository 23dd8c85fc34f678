#include "cli/run_options.h"

#include <toml++/toml.h>
#include <cerrno>
#include <cmath>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "crypto/scope.h"
#include "exec/env_filter.h"

namespace yonder::cli {
namespace {

#ifndef YONDER_ASSIGN
#define YONDER_ASSIGN(lhs, expr)                         \
  do {                                                   \
    auto yonder_r_ = (expr);                             \
    if (!yonder_r_) return std::move(yonder_r_).error(); \
    lhs = std::move(*yonder_r_);                         \
  } while (0)
#endif

Error invalid(const std::string& message) {
  return make_error(ErrorCode::kInvalidArgument, message);
}

// Reads at most `max` bytes of `path`; more is an error naming `what`.
Result<std::string> read_bounded(const std::string& path, size_t max, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return invalid("cannot read " + what + " " + path + ": " + std::strerror(errno));
  std::string text(max + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > max) {
    return make_error(ErrorCode::kResourceExhausted,
                      path + " is larger than " + std::to_string(max / 1024) + " KiB; a " + what + " is a few lines");
  }
  return text;
}

std::string relative_to(const std::string& base_dir, const std::string& path) {
  std::filesystem::path p(path);
  if (p.is_absolute() || base_dir.empty()) return p.lexically_normal().string();
  return (std::filesystem::path(base_dir) / p).lexically_normal().string();
}

// ---- job files

// The keys of a job file, in the order docs/cli.md lists them.
constexpr const char* kJobKeys =
    "on, name, image, command, gpus, vram, cpus, memory, disk, shm_size, time, env, env_file, workdir, out, ports, upload, "
    "no_upload, detach, tty, after, after_ok, hold, mesh, cuda, labels, group, retries, replicas, validator";

class JobFileReader {
 public:
  JobFileReader(std::string origin, std::string base_dir) : origin_(std::move(origin)), base_(std::move(base_dir)) {}

  Result<RunArgs> read(const toml::table& root) {
    RunArgs a;
    for (auto&& [k, node] : root) {
      std::string key(k.str());
      Status st = field(key, node, a);
      if (!st) return std::move(st).error();
    }
    if (!a.upload_dir.empty() && a.no_upload) {
      return invalid(origin_ + ": `upload` and `no_upload = true` contradict each other; keep one");
    }
    return a;
  }

 private:
  std::string at(const toml::node& n) const { return origin_ + ":" + std::to_string(n.source().begin.line); }
  Error bad(const toml::node& n, const std::string& key, const std::string& want) const {
    return invalid(at(n) + ": `" + key + "` must be " + want);
  }

  Result<std::string> string(const toml::node& n, const std::string& key) const {
    if (auto s = n.as_string()) return s->get();
    return bad(n, key, "a string");
  }
  Result<bool> boolean(const toml::node& n, const std::string& key) const {
    if (auto b = n.as_boolean()) return b->get();
    return bad(n, key, "true or false");
  }
  Result<std::vector<std::string>> strings(const toml::node& n, const std::string& key, const std::string& want) const {
    auto* arr = n.as_array();
    if (arr == nullptr) return bad(n, key, want);
    std::vector<std::string> out;
    for (const auto& item : *arr) {
      auto s = item.as_string();
      if (s == nullptr) return bad(item, key, want);
      out.push_back(s->get());
    }
    return out;
  }

  Status field(const std::string& key, const toml::node& n, RunArgs& a) const {
    if (key == "on") {
      YONDER_ASSIGN(a.peer, string(n, key));
    } else if (key == "image") {
      YONDER_ASSIGN(a.image, string(n, key));
    } else if (key == "command") {
      YONDER_ASSIGN(a.command, strings(n, key,
                                       "an array of strings, e.g. [\"python\", \"train.py\"] (a shell line: "
                                       "[\"sh\", \"-c\", \"...\"])"));
      if (a.command.empty()) return bad(n, key, "a non-empty array (leave it out to give the command after --)");
    } else if (key == "gpus") {
      if (auto i = n.as_integer(); i != nullptr && i->get() >= 0 && i->get() <= 1024) {
        a.gpus = static_cast<double>(i->get());
      } else if (auto f = n.as_floating_point(); f != nullptr && f->get() > 0 && f->get() < 1) {
        a.gpus = f->get();
      } else {
        return bad(n, key, "a whole number of GPUs, or a fraction below 1 for a share of one (0.5)");
      }
    } else if (key == "cpus") {
      if (auto i = n.as_integer()) {
        a.cpus = std::to_string(i->get());
      } else if (auto f = n.as_floating_point()) {
        a.cpus = std::to_string(f->get());
      } else if (auto s = n.as_string()) {
        a.cpus = s->get();
      } else {
        return bad(n, key, "a number like 2 or 0.5");
      }
    } else if (key == "vram" || key == "memory" || key == "disk" || key == "shm_size") {
      auto s = n.as_string();
      if (s == nullptr) return bad(n, key, "a size in quotes, like \"16G\"");
      (key == "vram" ? a.vram : key == "memory" ? a.memory : key == "disk" ? a.disk : a.shm) = s->get();
    } else if (key == "name") {
      YONDER_ASSIGN(a.name, string(n, key));
    } else if (key == "time") {
      auto s = n.as_string();
      if (s == nullptr) return bad(n, key, "a duration in quotes, like \"2h\" or \"90m\"");
      a.time = s->get();
    } else if (key == "env") {
      auto* table = n.as_table();
      if (table == nullptr) return bad(n, key, "a table: [env] with KEY = \"value\" lines");
      for (auto&& [name_key, value] : *table) {
        std::string name(name_key.str());
        if (!exec::is_valid_env_name(name)) {
          return invalid(at(value) + ": `" + name.substr(0, 64) +
                         "` is not a variable name: use letters, digits and '_', not starting with a digit");
        }
        std::string text;
        if (auto s = value.as_string()) {
          text = s->get();
        } else if (auto i = value.as_integer()) {
          text = std::to_string(i->get());
        } else if (auto b = value.as_boolean()) {
          text = b->get() ? "true" : "false";
        } else {
          return bad(value, "env." + name, "a string, an integer or true/false");
        }
        a.env.push_back(name + "=" + text);
      }
    } else if (key == "env_file") {
      if (auto s = n.as_string()) {
        a.env_files.push_back(relative_to(base_, s->get()));
      } else {
        std::vector<std::string> files;
        YONDER_ASSIGN(files, strings(n, key, "a file name or an array of them"));
        for (const auto& f : files) a.env_files.push_back(relative_to(base_, f));
      }
    } else if (key == "workdir") {
      YONDER_ASSIGN(a.workdir, string(n, key));
    } else if (key == "out") {
      YONDER_ASSIGN(a.out, strings(n, key, "an array of workspace paths, e.g. [\"results/\"]"));
    } else if (key == "ports") {
      auto* arr = n.as_array();
      if (arr == nullptr) return bad(n, key, "an array like [\"8080:80\"]");
      for (const auto& item : *arr) {
        if (auto s = item.as_string()) {
          a.ports.push_back(s->get());
        } else if (auto i = item.as_integer()) {
          a.ports.push_back(std::to_string(i->get()));
        } else {
          return bad(item, key, "an array of \"LOCAL:REMOTE\" strings or port numbers");
        }
        if (auto p = parse_port_pair(a.ports.back()); !p) return Error(p.error()).with_context(at(item));
      }
    } else if (key == "upload") {
      std::string dir;
      YONDER_ASSIGN(dir, string(n, key));
      a.upload_dir = relative_to(base_, dir);
    } else if (key == "no_upload") {
      YONDER_ASSIGN(a.no_upload, boolean(n, key));
    } else if (key == "detach") {
      YONDER_ASSIGN(a.detach, boolean(n, key));
    } else if (key == "tty") {
      YONDER_ASSIGN(a.tty, boolean(n, key));
    } else if (key == "after") {
      YONDER_ASSIGN(a.after, strings(n, key, "an array of job ids"));
    } else if (key == "after_ok") {
      YONDER_ASSIGN(a.after_ok, strings(n, key, "an array of job ids"));
    } else if (key == "hold") {
      YONDER_ASSIGN(a.hold, boolean(n, key));
    } else if (key == "mesh") {
      YONDER_ASSIGN(a.mesh, boolean(n, key));
    } else if (key == "cuda") {
      if (auto s = n.as_string()) {
        a.cuda = s->get();
      } else if (auto f = n.as_floating_point()) {
        char text[16];
        std::snprintf(text, sizeof text, "%.1f", f->get());
        a.cuda = text;
      } else {
        return bad(n, key, "a compute capability like \"8.0\"");
      }
    } else if (key == "retries" || key == "replicas") {
      auto i = n.as_integer();
      if (i == nullptr || i->get() < 0 || i->get() > 100) return bad(n, key, "a whole number");
      (key == "retries" ? a.retries : a.replicas) = static_cast<int>(i->get());
    } else if (key == "validator") {
      std::string v;
      YONDER_ASSIGN(v, string(n, key));
      a.validator = v;
    } else if (key == "group") {
      std::string g;
      YONDER_ASSIGN(g, string(n, key));
      a.group = g;
    } else if (key == "labels") {
      // [labels] site = "lab2", or ["site=lab2"] like --label.
      if (auto* table = n.as_table()) {
        for (auto&& [label_key, value] : *table) {
          auto s = value.as_string();
          if (s == nullptr) return bad(value, "labels." + std::string(label_key.str()), "a string");
          a.labels.push_back(std::string(label_key.str()) + "=" + s->get());
        }
      } else {
        YONDER_ASSIGN(a.labels, strings(n, key, "a table ([labels] with key = \"value\") or [\"key=value\", ...]"));
        for (const auto& l : a.labels) {
          if (l.find('=') == std::string::npos || l[0] == '=') return bad(n, key, "made of \"key=value\" strings");
        }
      }
    } else {
      return invalid(at(n) + ": unknown key `" + key.substr(0, 64) + "`; a job file has " + kJobKeys);
    }
    return ok_status();
  }

  std::string origin_;
  std::string base_;
};

bool run_parse_port(std::string_view text, int min, int& out) {
  int v = -1;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || v < min || v > 65535) return false;
  out = v;
  return true;
}

}  // namespace

Result<std::vector<std::pair<std::string, std::string>>> parse_env_file(std::string_view text,
                                                                        const std::string& origin,
                                                                        const config::EnvFn& env) {
  if (text.size() > kMaxEnvFileBytes) {
    return make_error(ErrorCode::kResourceExhausted, origin + " is larger than 256 KiB; an env file is a few lines");
  }
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // a UTF-8 byte order mark
  std::vector<std::pair<std::string, std::string>> out;
  size_t line_no = 0;
  while (!text.empty()) {
    ++line_no;
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);  // written on Windows
    size_t first = line.find_first_not_of(" \t\v\f");
    if (first == std::string_view::npos || line[first] == '#') continue;
    line.remove_prefix(first);
    std::string where = origin + ":" + std::to_string(line_no);
    size_t eq = line.find('=');
    std::string name(line.substr(0, eq));
    if (name.empty()) return invalid(where + ": no variable name before '='");
    if (!exec::is_valid_env_name(name)) {
      return invalid(where + ": `" + name.substr(0, 64) +
                     "` is not a variable name: write KEY=VALUE, with letters, digits and '_' in KEY (not starting "
                     "with a digit)");
    }
    std::string value;
    if (eq == std::string_view::npos) {
      auto local = env(name.c_str());
      if (!local) continue;  // as docker does: a bare name that is not set here is left out
      value = *local;
    } else {
      value = std::string(line.substr(eq + 1));
    }
    if (value.find('\0') != std::string::npos) return invalid(where + ": the value of " + name + " has a NUL byte");
    if (value.size() > exec::kMaxEnvValueBytes) {
      return invalid(where + ": the value of " + name + " is longer than " +
                     std::to_string(exec::kMaxEnvValueBytes / 1024) + " KiB");
    }
    out.emplace_back(std::move(name), std::move(value));
  }
  return out;
}

Result<std::vector<std::pair<std::string, std::string>>> read_env_file(const std::string& path,
                                                                       const config::EnvFn& env) {
  auto text = read_bounded(path, kMaxEnvFileBytes, "env file");
  if (!text) return std::move(text).error();
  return parse_env_file(*text, path, env);
}

Result<RunArgs> parse_job_file(std::string_view text, const std::string& origin, const std::string& base_dir) {
  if (text.size() > kMaxJobFileBytes) {
    return make_error(ErrorCode::kResourceExhausted, origin + " is larger than 256 KiB; a job file is a few lines");
  }
  toml::table root;
  try {
    root = toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    return invalid(origin + ":" + std::to_string(e.source().begin.line) + ": " + std::string(e.description()) +
                   "; fix the TOML syntax there");
  } catch (const std::exception& e) {
    return invalid(origin + ": " + e.what());
  }
  return JobFileReader(origin, base_dir).read(root);
}

Result<RunArgs> read_job_file(const std::string& path) {
  auto text = read_bounded(path, kMaxJobFileBytes, "job file");
  if (!text) return std::move(text).error();
  std::error_code ec;
  auto dir = std::filesystem::absolute(std::filesystem::path(path), ec).parent_path();
  return parse_job_file(*text, path, ec ? std::string() : dir.string());
}

Result<PortPair> parse_port_pair(std::string_view text) {
  PortPair p;
  size_t colon = text.find(':');
  bool ok = colon == std::string_view::npos
                ? run_parse_port(text, 1, p.remote) && run_parse_port(text, 1, p.local)
                : run_parse_port(text.substr(0, colon), 0, p.local) && run_parse_port(text.substr(colon + 1), 1, p.remote);
  if (!ok) {
    return invalid("`" + std::string(text.substr(0, 32)) +
                   "` is not LOCAL:REMOTE (e.g. 8080:80; LOCAL 0 picks a free port) or REMOTE");
  }
  return p;
}

Result<RunArgs> effective_run_args(const RunArgs& given, const config::EnvFn& env) {
  RunArgs out = given;
  RunArgs file;
  if (!given.job_file.empty()) {
    auto f = read_job_file(given.job_file);
    if (!f) return std::move(f).error();
    file = std::move(*f);
    auto fill = [](auto& flag, const auto& from_file) {
      if (flag.empty()) flag = from_file;
    };
    fill(out.peer, file.peer);
    fill(out.image, file.image);
    fill(out.command, file.command);
    fill(out.workdir, file.workdir);
    fill(out.name, file.name);
    fill(out.out, file.out);
    fill(out.ports, file.ports);
    for (auto [flag, from_file] :
         {std::pair{&out.vram, &file.vram}, std::pair{&out.cpus, &file.cpus}, std::pair{&out.memory, &file.memory},
          std::pair{&out.disk, &file.disk}, std::pair{&out.time, &file.time}, std::pair{&out.shm, &file.shm}}) {
      if (!*flag) *flag = *from_file;
    }
    if (!out.gpus) out.gpus = file.gpus;
    if (out.upload_dir.empty() && !out.no_upload) {
      out.upload_dir = file.upload_dir;
      out.no_upload = file.no_upload;
    }
    out.detach = given.detach || file.detach;
    out.tty = given.tty || file.tty;
    out.hold = given.hold || file.hold;
    fill(out.after, file.after);
    fill(out.after_ok, file.after_ok);
    out.mesh = given.mesh || file.mesh;
    fill(out.labels, file.labels);
    if (!out.cuda) out.cuda = file.cuda;
    if (!out.group) out.group = file.group;
    if (!out.retries) out.retries = file.retries;
    if (!out.replicas) out.replicas = file.replicas;
    if (!out.validator) out.validator = file.validator;
  }
  // The environment, by layers: each later one wins (cmd_run keeps the last
  // value of a name).
  out.env.clear();
  out.env_files.clear();
  auto add_layer = [&](const std::vector<std::string>& env_files, const std::vector<std::string>& pairs) -> Status {
    for (const auto& path : env_files) {
      auto entries = read_env_file(path, env);
      if (!entries) return std::move(entries).error();
      for (auto& [k, v] : *entries) out.env.push_back(k + "=" + v);
    }
    out.env.insert(out.env.end(), pairs.begin(), pairs.end());
    return ok_status();
  };
  YONDER_TRY(add_layer(file.env_files, file.env));
  // `-e KEY` (no '='), as with docker: the value of KEY here; left out when
  // KEY is not set here.
  std::vector<std::string> given_env;
  for (const auto& kv : given.env) {
    if (kv.find('=') != std::string::npos || kv.empty()) {
      given_env.push_back(kv);
    } else if (auto v = env(kv.c_str())) {
      given_env.push_back(kv + "=" + *v);
    }
  }
  YONDER_TRY(add_layer(given.env_files, given_env));
  for (const auto& p : out.ports) {
    if (auto parsed = parse_port_pair(p); !parsed) return Error(parsed.error()).with_context("-p");
  }
  return out;
}

Result<jobs::protocol::JobRequest> job_request_of(const RunArgs& a) {
  jobs::protocol::JobRequest job;
  job.image = a.image;
  job.command = a.command;
  for (const auto& kv : a.env) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      return make_error(ErrorCode::kInvalidArgument, "-e takes KEY=VALUE, not \"" + kv + "\"");
    }
    job.env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  job.workdir = a.workdir;
  job.tty = a.tty;
  job.after = a.after;
  job.after_ok = a.after_ok;
  job.hold = a.hold;
  if (a.gpus) {
    // Whole GPUs, or a share of one: a fraction of its memory.
    double g = *a.gpus;
    if (g > 0 && g < 1) {
      job.share_permille = static_cast<int32_t>(std::lround(g * 1000));
      if (job.share_permille < 1 || job.share_permille > 999) {
        return make_error(ErrorCode::kInvalidArgument, "--gpus " + std::to_string(g) +
                                                           " is too small a share: give at least 0.001 (or --vram SIZE)");
      }
    } else if (g >= 0 && g <= 64 && g == std::floor(g)) {
      job.gpus = static_cast<int>(g);
    } else {
      return make_error(ErrorCode::kInvalidArgument,
                        "--gpus takes a whole number of GPUs (1, 2), or a fraction below 1 for a share of one (0.5)");
    }
  }
  auto mib = [](const std::optional<std::string>& v, int64_t& out, const char* flag) -> Status {
    if (!v) return ok_status();
    auto n = parse_resource_size(*v, flag);
    if (!n) return std::move(n).error();
    out = static_cast<int64_t>(*n >> 20);
    return ok_status();
  };
  // --vram: per whole GPU; the cap of a fraction; alone, a share of that much.
  YONDER_TRY(mib(a.vram, !a.gpus && a.vram ? job.share_vram_mib : job.vram_mib, "--vram"));
  YONDER_TRY(mib(a.memory, job.memory_mib, "--memory"));
  YONDER_TRY(mib(a.disk, job.disk_mib, "--disk"));
  YONDER_TRY(mib(a.shm, job.shm_mib, "--shm-size"));
  if (a.time) {
    auto d = parse_duration_s(*a.time);
    if (!d) return Error(d.error()).with_context("--time");
    job.wall_time_s = *d;
  }
  if (a.cpus) {
    char* end = nullptr;
    double c = std::strtod(a.cpus->c_str(), &end);
    if (end == a.cpus->c_str() || *end != '\0' || c <= 0) {
      return make_error(ErrorCode::kInvalidArgument, "--cpus must be a number like 2 or 0.5");
    }
    job.cpus = c;
  }
  return job;
}

}  // namespace yonder::cli

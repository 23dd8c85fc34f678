#include "exec/image_policy.h"

#include <algorithm>
#include <cctype>

namespace yonder::exec {
namespace {

constexpr size_t kMaxReference = 512;

bool is_hex64(std::string_view s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](unsigned char c) {
           return std::isdigit(c) || (c >= 'a' && c <= 'f');
         });
}

// One path component: lower-case alphanumerics separated by '.', '_', '__' or '-'.
bool valid_component(std::string_view c) {
  if (c.empty() || c.size() > 128) return false;
  if (!std::isalnum(static_cast<unsigned char>(c.front())) || !std::isalnum(static_cast<unsigned char>(c.back()))) {
    return false;
  }
  return std::all_of(c.begin(), c.end(), [](unsigned char ch) {
    return (std::isalnum(ch) && !std::isupper(ch)) || ch == '.' || ch == '_' || ch == '-';
  });
}

bool valid_tag(std::string_view t) {
  if (t.empty() || t.size() > 128) return false;
  if (!(std::isalnum(static_cast<unsigned char>(t[0])) || t[0] == '_')) return false;
  return std::all_of(t.begin(), t.end(),
                     [](unsigned char ch) { return std::isalnum(ch) || ch == '.' || ch == '_' || ch == '-'; });
}

bool valid_registry(std::string_view r) {
  if (r.empty() || r.size() > 255) return false;
  return std::all_of(r.begin(), r.end(), [](unsigned char ch) {
    return (std::isalnum(ch) && !std::isupper(ch)) || ch == '.' || ch == '-' || ch == ':';
  });
}

Error bad_ref(std::string_view text, const std::string& why) {
  return make_error(ErrorCode::kInvalidArgument, "image reference '" + std::string(text.substr(0, 80)) +
                                                     "' is not valid: " + why);
}

}  // namespace

const char* pull_policy_name(PullPolicy p) {
  switch (p) {
    case PullPolicy::kNever: return "never";
    case PullPolicy::kMissing: return "missing";
    case PullPolicy::kAlways: return "always";
  }
  return "?";
}

std::string ImageRef::to_string() const {
  std::string out = repository();
  if (!tag.empty()) out += ":" + tag;
  if (!digest.empty()) out += "@" + digest;
  return out;
}

Result<ImageRef> parse_image_ref(std::string_view text) {
  if (text.empty()) return bad_ref(text, "it is empty");
  if (text.size() > kMaxReference) return bad_ref(text, "it is longer than 512 bytes");
  ImageRef ref;
  std::string_view rest = text;
  if (auto at = rest.find('@'); at != std::string_view::npos) {
    std::string_view digest = rest.substr(at + 1);
    if (digest.rfind("sha256:", 0) != 0 || !is_hex64(digest.substr(7))) {
      return bad_ref(text, "the digest must be sha256: followed by 64 lower-case hex digits");
    }
    ref.digest = std::string(digest);
    rest = rest.substr(0, at);
  }
  size_t last_slash = rest.rfind('/');
  size_t colon = rest.rfind(':');
  if (colon != std::string_view::npos && (last_slash == std::string_view::npos || colon > last_slash)) {
    ref.tag = std::string(rest.substr(colon + 1));
    if (!valid_tag(ref.tag)) return bad_ref(text, "the tag '" + ref.tag + "' has characters other than [A-Za-z0-9_.-]");
    rest = rest.substr(0, colon);
  }
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t slash = rest.find('/', start);
    parts.push_back(rest.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start));
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  // The first component names a registry when it looks like a host.
  if (parts.size() > 1 && (parts[0].find('.') != std::string_view::npos ||
                           parts[0].find(':') != std::string_view::npos || parts[0] == "localhost")) {
    if (!valid_registry(parts[0])) return bad_ref(text, "the registry '" + std::string(parts[0]) + "' is not a host name");
    ref.registry = std::string(parts[0]);
    parts.erase(parts.begin());
  } else {
    ref.registry = "docker.io";
  }
  if (ref.registry == "index.docker.io") ref.registry = "docker.io";
  for (auto p : parts) {
    if (!valid_component(p)) {
      return bad_ref(text, "path component '" + std::string(p.substr(0, 64)) +
                               "' must be lower-case letters and digits separated by '.', '_' or '-'");
    }
    if (!ref.path.empty()) ref.path += "/";
    ref.path += std::string(p);
  }
  if (ref.registry == "docker.io" && parts.size() == 1) ref.path = "library/" + ref.path;
  if (ref.tag.empty() && ref.digest.empty()) ref.tag = "latest";
  return ref;
}

Result<ImagePolicy> ImagePolicy::parse(std::string_view allowlist, std::string_view pull) {
  ImagePolicy policy;
  if (pull == "never") {
    policy.pull_ = PullPolicy::kNever;
  } else if (pull == "missing") {
    policy.pull_ = PullPolicy::kMissing;
  } else if (pull == "always") {
    policy.pull_ = PullPolicy::kAlways;
  } else {
    return make_error(ErrorCode::kInvalidArgument,
                      "executor.pull_policy must be never, missing or always, not '" + std::string(pull) + "'");
  }
  size_t start = 0;
  while (start <= allowlist.size()) {
    size_t comma = allowlist.find(',', start);
    std::string_view item = allowlist.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    start = comma == std::string_view::npos ? allowlist.size() + 1 : comma + 1;
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.front()))) item.remove_prefix(1);
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.back()))) item.remove_suffix(1);
    if (item.empty()) continue;
    ImageRule rule;
    rule.text = std::string(item);
    std::string_view body = item;
    if (body.size() > 2 && body.substr(body.size() - 2) == "/*") {
      rule.prefix = true;
      body.remove_suffix(2);
    }
    if (rule.prefix) {
      // Prefix rules are repository paths, not references: no library/
      // insertion ("python/*" is docker.io/python/...), no tag, no digest.
      std::string b(body);
      size_t slash = b.find('/');
      std::string first = b.substr(0, slash);
      bool host = slash != std::string::npos &&
                  (first.find('.') != std::string::npos || first.find(':') != std::string::npos || first == "localhost");
      std::string path = host ? b.substr(slash + 1) : b;
      if (host && !valid_registry(first)) {
        return make_error(ErrorCode::kInvalidArgument, "executor.image_allowlist rule '" + rule.text + "' has a bad registry");
      }
      size_t s0 = 0;
      while (true) {
        size_t e = path.find('/', s0);
        if (!valid_component(std::string_view(path).substr(s0, e == std::string::npos ? std::string::npos : e - s0))) {
          return make_error(ErrorCode::kInvalidArgument,
                            "executor.image_allowlist rule '" + rule.text +
                                "' is not a repository path followed by /* (e.g. ghcr.io/acme/*)");
        }
        if (e == std::string::npos) break;
        s0 = e + 1;
      }
      rule.repository = (host ? first : std::string("docker.io")) + "/" + path + "/";
      policy.rules_.push_back(std::move(rule));
      continue;
    }
    auto ref = parse_image_ref(body);
    if (!ref) {
      return Error(ref.error()).with_context("executor.image_allowlist rule '" + rule.text + "'");
    }
    if (!ref->tag.empty() && (ref->tag != "latest" || body.find(":latest") != std::string_view::npos)) {
      return make_error(ErrorCode::kInvalidArgument, "executor.image_allowlist rule '" + rule.text +
                                                         "' names a tag; rules name repositories (pin with @sha256:)");
    }
    if (!ref->digest.empty()) ref->tag.clear();
    rule.repository = ref->repository();
    rule.digest = ref->digest;
    policy.rules_.push_back(std::move(rule));
  }
  return policy;
}

Result<ImageRule> ImagePolicy::check(const ImageRef& image) const {
  std::string repo = image.repository();
  for (const auto& rule : rules_) {
    bool match = rule.prefix ? repo.size() > rule.repository.size() && repo.rfind(rule.repository, 0) == 0
                             : repo == rule.repository;
    if (!match) continue;
    if (!rule.digest.empty() && !image.digest.empty() && image.digest != rule.digest) continue;
    return rule;
  }
  std::string allowed;
  for (const auto& r : rules_) allowed += (allowed.empty() ? "" : ", ") + r.text;
  return make_error(ErrorCode::kPermissionDenied,
                    "image " + image.to_string() + " is not allowed by this provider's image policy "
                    "(executor.image_allowlist: " + (allowed.empty() ? "empty, so no image is allowed" : allowed) + ")");
}

}  // namespace yonder::exec

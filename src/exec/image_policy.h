// Which images a provider lets jobs run, and when the engine may pull them.
//
// Image references are normalised the way Docker does before matching
// ("python:3.12" is docker.io/library/python, tag 3.12), and rules match
// whole repository paths, never string prefixes:
//   docker.io/library/python        exactly that repository, any tag
//   ghcr.io/acme/*                  any repository below ghcr.io/acme/
//   python@sha256:<64 hex>          that repository, and only that digest
// so allowing "python" does not allow "python/anything" or "pythonista".
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace yonder::exec {

struct ImageRef {
  std::string registry;    // "docker.io", "ghcr.io", "localhost:5000"
  std::string path;        // "library/python"
  std::string tag;         // "latest" when neither tag nor digest was given
  std::string digest;      // "sha256:..." or ""

  std::string repository() const { return registry + "/" + path; }
  // Canonical text: repository[:tag][@digest].
  std::string to_string() const;
};

// Parses and normalises a reference; kInvalidArgument says what is wrong.
Result<ImageRef> parse_image_ref(std::string_view text);

enum class PullPolicy { kNever, kMissing, kAlways };
const char* pull_policy_name(PullPolicy p);

struct ImageRule {
  std::string repository;  // normalised; for a prefix rule, ends with '/'
  bool prefix = false;
  std::string digest;      // pinned digest or ""
  std::string text;        // as written in the config, for messages
};

class ImagePolicy {
 public:
  // `allowlist`: comma-separated rules (see above); `pull`: never|missing|always.
  static Result<ImagePolicy> parse(std::string_view allowlist, std::string_view pull);

  // The rule that allows `image`, or kPermissionDenied naming the policy.
  Result<ImageRule> check(const ImageRef& image) const;
  PullPolicy pull() const { return pull_; }
  const std::vector<ImageRule>& rules() const { return rules_; }

 private:
  std::vector<ImageRule> rules_;
  PullPolicy pull_ = PullPolicy::kMissing;
};

}  // namespace yonder::exec

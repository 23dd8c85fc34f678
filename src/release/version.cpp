// The only file that includes the generated git_revision.h: a new revision
// recompiles this file and relinks the programs, nothing else.
#include "release/version.h"

#include "release/git_revision.h"

namespace yonder::release {

std::string_view project_version() {
  return kGeneratedProjectVersion;
}
std::string_view git_revision() {
  return kGeneratedGitRevision;
}

std::string version_line(std::string_view program) {
  return std::string(program) + " " + std::string(project_version()) + " (git " + std::string(git_revision()) + ")";
}

}  // namespace yonder::release

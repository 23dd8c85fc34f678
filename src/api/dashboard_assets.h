// The web dashboard's files (web/dashboard/), compiled into the daemon by
// cmake/EmbedAssets.cmake, so the dashboard needs no build step and no files
// on the user's machine. Served by api/builtin_routes.cpp: index.html at /,
// the rest at /assets/NAME.
#pragma once

#include <span>
#include <string_view>

namespace yonder::api {

struct DashboardAsset {
  std::string_view name;          // file name, e.g. "app.js"
  std::string_view content_type;  // for the Content-Type header
  std::string_view body;          // the file's bytes (static storage)
};

// Every embedded file, in the order CMake lists them.
std::span<const DashboardAsset> dashboard_assets();

}  // namespace yonder::api

// Fuzzes every decoder of the Docker Engine API's JSON replies
// (src/exec/docker/docker_json.h). The first byte picks the decoder.
#include <cstdint>
#include <string_view>

#include "exec/docker/docker_json.h"

using namespace yonder::exec::docker;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 256 * 1024) return 0;
  std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 12) {
    case 0: (void)parse_error_message(body); break;
    case 1: (void)parse_create_response(body); break;
    case 2: {
      auto info = parse_inspect(body);
      if (info && info->status.size() > body.size()) __builtin_trap();
      break;
    }
    case 3: (void)parse_wait(body); break;
    case 4: (void)parse_version(body); break;
    case 5: (void)parse_info(body); break;
    case 6: (void)parse_container_list(body); break;
    case 7: (void)parse_stats(body); break;
    case 8: (void)parse_exec_create(body); break;
    case 9: (void)parse_exec_inspect(body); break;
    case 10: (void)parse_image_inspect(body); break;
    default: (void)parse_pull_progress_error(body); break;
  }
  return 0;
}

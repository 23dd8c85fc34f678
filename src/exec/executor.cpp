#include "exec/executor.h"

#include <nlohmann/json.hpp>

namespace yonder::exec {

const char* isolation_name(Isolation i) { return i == Isolation::kGvisor ? "gvisor" : "standard"; }

const char* task_state_name(TaskState s) {
  switch (s) {
    case TaskState::kCreated: return "created";
    case TaskState::kRunning: return "running";
    case TaskState::kExited: return "exited";
    case TaskState::kMissing: return "missing";
  }
  return "?";
}

nlohmann::json TaskHandle::to_json() const {
  return {{"backend", backend}, {"job_id", job_id}, {"task_id", task_id}, {"workspace", workspace},
          {"workspace_image", workspace_image}, {"image_id", image_id}};
}

Result<TaskHandle> TaskHandle::from_json(const nlohmann::json& json) {
  TaskHandle h;
  if (!json.is_object()) return make_error(ErrorCode::kDataLoss, "stored task handle is not a JSON object");
  for (auto [key, field] : {std::pair{"backend", &h.backend}, std::pair{"job_id", &h.job_id},
                            std::pair{"task_id", &h.task_id}, std::pair{"workspace", &h.workspace},
                            std::pair{"workspace_image", &h.workspace_image}}) {
    auto it = json.find(key);
    if (it == json.end() || !it->is_string() || it->get_ref<const std::string&>().size() > 4096) {
      return make_error(ErrorCode::kDataLoss, std::string("stored task handle has no valid '") + key + "'");
    }
    *field = it->get<std::string>();
  }
  // Optional: handles stored before it existed have none.
  if (auto it = json.find("image_id"); it != json.end() && it->is_string() && it->get_ref<const std::string&>().size() <= 256) {
    h.image_id = it->get<std::string>();
  }
  return h;
}

}  // namespace yonder::exec

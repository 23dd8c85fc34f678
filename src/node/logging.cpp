#include "node/logging.h"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>

#include "os/terminal.h"

namespace yonder::node {
namespace {

// One JSON object per line on stderr: {"ts","level","logger","msg"}.
class JsonLinesSink final : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(msg.time.time_since_epoch()).count();
    nlohmann::json line = {
        {"ts", static_cast<double>(us) / 1e6},
        {"level", std::string(spdlog::level::to_string_view(msg.level).data())},
        {"logger", std::string(msg.logger_name.data(), msg.logger_name.size())},
        {"msg", std::string(msg.payload.data(), msg.payload.size())},
    };
    std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    std::fwrite(text.data(), 1, text.size(), stderr);
  }
  void flush_() override { std::fflush(stderr); }
};

}  // namespace

void setup_logging(const std::string& format, const std::string& level) {
  bool json = format == "json" || (format == "auto" && !os::stderr_is_terminal());
  std::shared_ptr<spdlog::logger> logger;
  if (json) {
    logger = std::make_shared<spdlog::logger>("yonderd", std::make_shared<JsonLinesSink>());
  } else {
    logger = std::make_shared<spdlog::logger>("yonderd", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
    logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%-5l%$ %v");
  }
  logger->set_level(spdlog::level::from_str(level));
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
}

}  // namespace yonder::node

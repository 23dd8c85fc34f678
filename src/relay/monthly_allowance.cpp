#include "relay/monthly_allowance.h"

#include <cstdio>

#include <nlohmann/json.hpp>

namespace yonder::relay {

std::string utc_month(std::chrono::system_clock::time_point t) {
  const auto ymd = std::chrono::year_month_day(std::chrono::floor<std::chrono::days>(t));
  char text[16];
  std::snprintf(text, sizeof text, "%04d-%02u", static_cast<int>(ymd.year()), static_cast<unsigned>(ymd.month()));
  return text;
}

void MonthlyAllowance::charge(uint64_t n, const std::string& month) {
  if (usage_.month != month) usage_ = MonthlyUsage{month, 0};
  usage_.bytes = n > UINT64_MAX - usage_.bytes ? UINT64_MAX : usage_.bytes + n;
}

std::string encode_monthly_usage(const MonthlyUsage& usage) {
  return nlohmann::json{{"month", usage.month}, {"bytes", usage.bytes}}.dump() + "\n";
}

namespace {

bool is_month(const std::string& m) {
  if (m.size() != 7 || m[4] != '-') return false;
  for (size_t i : {0, 1, 2, 3, 5, 6}) {
    if (m[i] < '0' || m[i] > '9') return false;
  }
  int month = (m[5] - '0') * 10 + (m[6] - '0');
  return month >= 1 && month <= 12;
}

Error damaged(const std::string& what) {
  return make_error(ErrorCode::kDataLoss, "the relay's usage record is damaged: " + what);
}

}  // namespace

Result<MonthlyUsage> decode_monthly_usage(std::string_view text) {
  if (text.size() > kMaxUsageText) return damaged("over " + std::to_string(kMaxUsageText) + " bytes");
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return damaged("not a JSON object");
  if (!j.contains("month") || !j["month"].is_string() || !is_month(j["month"].get<std::string>())) {
    return damaged("\"month\" is not YYYY-MM");
  }
  if (!j.contains("bytes") || !j["bytes"].is_number_unsigned()) {
    return damaged("\"bytes\" is not a non-negative integer");
  }
  return MonthlyUsage{j["month"].get<std::string>(), j["bytes"].get<uint64_t>()};
}

}  // namespace yonder::relay

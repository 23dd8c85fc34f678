// What a relay may carry for others in a calendar month (UTC): a yonderd
// relaying for its peers on its owner's home connection stays within the
// owner's data plan (relay.monthly_gb). Sans-I/O: the caller names the month
// (utc_month of its clock) and keeps the usage on disk (encode/decode below);
// the server charges every byte a pipe copies and, once the month's cap is
// reached, closes its pipes and refuses new ones until the month turns.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/error.h"

namespace yonder::relay {

struct MonthlyUsage {
  std::string month;   // "2026-12" (UTC); empty: nothing counted yet
  uint64_t bytes = 0;  // carried in that month, both directions
  bool operator==(const MonthlyUsage&) const = default;
};

// "2026-12" for `t`, in UTC.
std::string utc_month(std::chrono::system_clock::time_point t);

class MonthlyAllowance {
 public:
  // `cap`: bytes a month; 0: no cap (the usage is still counted).
  MonthlyAllowance(uint64_t cap, MonthlyUsage usage) : cap_(cap), usage_(std::move(usage)) {}

  // Counts `n` bytes carried in `month`; a new month starts from zero.
  void charge(uint64_t n, const std::string& month);
  // Whether more may be carried in `month`.
  bool open(const std::string& month) const { return cap_ == 0 || used(month) < cap_; }
  uint64_t used(const std::string& month) const { return usage_.month == month ? usage_.bytes : 0; }
  uint64_t cap() const { return cap_; }
  const MonthlyUsage& usage() const { return usage_; }

 private:
  uint64_t cap_;
  MonthlyUsage usage_;
};

// The usage as kept on disk: {"month":"2026-12","bytes":123}.
std::string encode_monthly_usage(const MonthlyUsage& usage);
// Decodes what encode_monthly_usage wrote: at most kMaxUsageText bytes, a
// month of the form YYYY-MM and a non-negative byte count; anything else is
// kDataLoss naming what is wrong (the caller says what it does about it:
// yonderd sets the file aside and counts the month again).
constexpr size_t kMaxUsageText = 256;
Result<MonthlyUsage> decode_monthly_usage(std::string_view text);

}  // namespace yonder::relay

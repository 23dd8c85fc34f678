// Prometheus text exposition format 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/): families
// with HELP and TYPE, samples with escaped label values. Building only; the
// numbers come from src/node (node/metrics_routes.h).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "api/server.h"
#include "base/latency_histogram.h"

namespace yonder::api {

using Labels = std::vector<std::pair<std::string, std::string>>;

class MetricsText {
 public:
  // Starts a family; `type` is "gauge", "counter" or "histogram". Samples follow.
  void family(const std::string& name, const std::string& type, const std::string& help);
  void sample(const std::string& name, const Labels& labels, double value);
  // A histogram family's series for `labels`: NAME_bucket{...,le="B"} for
  // each bound and +Inf (cumulative), NAME_sum (seconds) and NAME_count.
  void histogram(const std::string& name, const Labels& labels, const LatencyHistogram::Snapshot& h);
  const std::string& text() const { return text_; }
  // 200 text/plain; version=0.0.4.
  Response response() const;

 private:
  std::string text_;
};

// A label value with \\, \" and newlines escaped.
std::string escape_label_value(const std::string& v);

}  // namespace yonder::api

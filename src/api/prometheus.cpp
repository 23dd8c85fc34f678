#include "api/prometheus.h"

#include <cmath>
#include <cstdio>

namespace yonder::api {

std::string escape_label_value(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

void MetricsText::family(const std::string& name, const std::string& type, const std::string& help) {
  std::string h;
  for (char c : help) h += c == '\n' ? ' ' : c;
  text_ += "# HELP " + name + " " + h + "\n# TYPE " + name + " " + type + "\n";
}

void MetricsText::sample(const std::string& name, const Labels& labels, double value) {
  text_ += name;
  if (!labels.empty()) {
    text_ += '{';
    for (size_t i = 0; i < labels.size(); ++i) {
      if (i) text_ += ',';
      text_ += labels[i].first + "=\"" + escape_label_value(labels[i].second) + "\"";
    }
    text_ += '}';
  }
  char buf[64];
  if (std::isfinite(value) && value == std::floor(value) && std::fabs(value) < 1e15) {
    std::snprintf(buf, sizeof buf, " %.0f\n", value);
  } else {
    std::snprintf(buf, sizeof buf, " %.9g\n", value);
  }
  text_ += buf;
}

void MetricsText::histogram(const std::string& name, const Labels& labels, const LatencyHistogram::Snapshot& h) {
  Labels with_le = labels;
  with_le.emplace_back("le", "");
  for (size_t i = 0; i < LatencyHistogram::kBounds.size(); ++i) {
    char bound[32];
    std::snprintf(bound, sizeof bound, "%g", LatencyHistogram::kBounds[i]);
    with_le.back().second = bound;
    sample(name + "_bucket", with_le, static_cast<double>(h.cumulative[i]));
  }
  with_le.back().second = "+Inf";
  sample(name + "_bucket", with_le, static_cast<double>(h.count));
  sample(name + "_sum", labels, h.sum_seconds);
  sample(name + "_count", labels, static_cast<double>(h.count));
}

Response MetricsText::response() const {
  return Response(200, text_, "text/plain; version=0.0.4; charset=utf-8");
}

}  // namespace yonder::api

// A tiny tool over src/portmap for tests/integration/portmap_lab_test: run
// inside a lab host's network namespace, it talks to the gateway there and
// prints JSON, one object per line, to stdout.
//
//   portmap_probe probe [--method any|nat-pmp|upnp-igd]
//   portmap_probe map PORT [--method M]     maps and exits (the lease stays)
//   portmap_probe unmap MAPPING_JSON
//   portmap_probe hold PORT [--method M]    a PortMapper: one status line per
//                                           change; stops (and unmaps) when
//                                           stdin reaches end of file
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "portmap/port_mapper.h"
#include "portmap/port_mapping.h"

namespace {

using namespace yonder;
using namespace yonder::portmap;

int usage() {
  std::cerr << "usage: portmap_probe probe|map PORT|unmap JSON|hold PORT [--method any|nat-pmp|upnp-igd]\n";
  return 2;
}

void emit(const nlohmann::json& j) {
  std::cout << j.dump() << std::endl;  // one line, flushed: the test reads it as it comes
}

nlohmann::json error_json(const Error& e) {
  return {{"ok", false}, {"code", error_code_name(e.code())}, {"error", e.to_string()}};
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  MapOptions options;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--method" && i + 1 < args.size()) {
      const std::string& m = args[i + 1];
      if (m == "any")
        options.method = Method::kAny;
      else if (m == kNatPmpName)
        options.method = Method::kNatPmp;
      else if (m == kUpnpIgdName)
        options.method = Method::kUpnpIgd;
      else
        return usage();
      args.erase(args.begin() + static_cast<long>(i), args.begin() + static_cast<long>(i) + 2);
      break;
    }
  }
  if (args.empty()) return usage();
  const std::string& cmd = args[0];
  auto port_arg = [&]() -> int {
    if (args.size() < 2) return -1;
    int p = std::atoi(args[1].c_str());
    return (p > 0 && p < 65536) ? p : -1;
  };

  if (cmd == "probe") {
    auto r = probe(options);
    if (!r.ok()) {
      emit(error_json(r.error()));
      return 1;
    }
    emit(r->to_json());
    return 0;
  }
  if (cmd == "map") {
    int p = port_arg();
    if (p < 0) return usage();
    auto m = map_tcp_port(static_cast<uint16_t>(p), options);
    if (!m.ok()) {
      emit(error_json(m.error()));
      return 1;
    }
    emit({{"ok", true}, {"mapping", m->to_json()}});
    return 0;
  }
  if (cmd == "unmap") {
    if (args.size() < 2) return usage();
    auto j = nlohmann::json::parse(args[1], nullptr, false);
    auto m = Mapping::from_json(j);
    if (!m.ok()) {
      emit(error_json(m.error()));
      return 2;
    }
    auto s = unmap(*m, options);
    emit(s.ok() ? nlohmann::json{{"ok", true}} : error_json(s.error()));
    return s.ok() ? 0 : 1;
  }
  if (cmd == "hold") {
    int p = port_arg();
    if (p < 0) return usage();
    PortMapper mapper(static_cast<uint16_t>(p), options, [](const PortMapperStatus& s) { emit(s.to_json()); });
    char buf[256];
    while (::read(STDIN_FILENO, buf, sizeof buf) > 0) {
    }
    mapper.stop();
    return 0;
  }
  return usage();
}

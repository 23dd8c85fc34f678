// An event loop on a thread inside one NAT-lab node's network namespace
// (NatLab::in_node), so every socket made on it lives there. For tests that
// run nodes in-process (relay_lab_test, punch_lab_test).
#pragma once

#include <utility>  // before Boost.Asio (GCC 12)

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <future>
#include <string>
#include <thread>

#include "support/nat_lab.h"

namespace yonder::testing {

class NodeLoop {
 public:
  NodeLoop(const NatLab& lab, const std::string& node)
      : thread_([this, &lab, node] { lab.in_node(node, [this] { io.run(); }); }) {}
  ~NodeLoop() {
    work_.reset();
    thread_.join();
  }
  NodeLoop(const NodeLoop&) = delete;
  NodeLoop& operator=(const NodeLoop&) = delete;

  // Runs f on the loop and returns its result.
  template <typename F>
  auto on(F f) {
    std::promise<decltype(f())> p;
    boost::asio::post(io, [&] { p.set_value(f()); });
    return p.get_future().get();
  }

  boost::asio::io_context io;

 private:
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_{io.get_executor()};
  std::thread thread_;
};

}  // namespace yonder::testing

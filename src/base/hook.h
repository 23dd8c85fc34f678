// A multi-subscriber event between features: the service that owns an
// event (a job ended, a member joined) fires it; each feature that cares
// subscribes while the daemon is composed, so no feature has to know who
// else listens, and a second subscriber never replaces the first.
//
// Threading: subscribe only before the event can fire (composition time);
// fire from any thread, as the owner documents. Subscribers run in the
// order they subscribed, on the firing thread, and must not block longer
// than the owner allows.
#pragma once

#include <functional>
#include <utility>
#include <vector>

namespace yonder {

template <class... Args>
class Hook {
 public:
  using Subscriber = std::function<void(const Args&...)>;
  void subscribe(Subscriber s) { subscribers_.push_back(std::move(s)); }
  void fire(const Args&... args) const {
    for (const auto& s : subscribers_) s(args...);
  }
  size_t size() const { return subscribers_.size(); }

 private:
  std::vector<Subscriber> subscribers_;
};

}  // namespace yonder

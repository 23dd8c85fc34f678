// The relay's byte and message budgets use the one token bucket of
// base/token_bucket.h.
#pragma once

#include "base/token_bucket.h"

namespace yonder::relay {

using yonder::MonoTime;
using yonder::TokenBucket;

}  // namespace yonder::relay

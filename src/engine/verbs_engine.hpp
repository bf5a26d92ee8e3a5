// RDMA verbs data plane (libibverbs, RC queue pairs). Built only when rdma-core was found.
#pragma once

#include <fabperf/engine/engine.hpp>

#include <memory>

namespace fabperf {

std::unique_ptr<Engine> make_verbs_engine();

}  // namespace fabperf

#include <fabperf/build_config.hpp>
#include <fabperf/engine.hpp>
#include <fabperf/error.hpp>

#include "engine/tcp_engine.hpp"

namespace fabperf {

std::unique_ptr<Engine> make_engine(Transport t) {
  switch (t) {
    case Transport::tcp: return std::make_unique<TcpEngine>();
    case Transport::rdma:
#if FABPERF_HAVE_RDMA
      throw UsageError("--transport rdma: the RDMA verbs engine is not implemented yet in this version");
#else
      throw UsageError("--transport rdma: fabperf was built without RDMA support (install libibverbs-dev and librdmacm-dev, then rebuild)");
#endif
  }
  throw UsageError("unknown transport");
}

}  // namespace fabperf

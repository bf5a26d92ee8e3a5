#include <fabperf/core/build_config.hpp>
#include <fabperf/core/error.hpp>
#include <fabperf/engine/engine.hpp>

#include "engine/tcp_engine.hpp"
#if FABPERF_HAVE_RDMA
#include "engine/verbs_engine.hpp"
#endif

namespace fabperf {

std::unique_ptr<Engine> make_engine(Transport t) {
  switch (t) {
    case Transport::tcp: return std::make_unique<TcpEngine>();
    case Transport::rdma:
#if FABPERF_HAVE_RDMA
      return make_verbs_engine();
#else
      throw UsageError(
          "--transport rdma: fabperf was built without RDMA support (install libibverbs-dev and librdmacm-dev, then "
          "rebuild)");
#endif
  }
  throw UsageError("unknown transport");
}

}  // namespace fabperf

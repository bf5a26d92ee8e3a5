// One include point for Boost.Asio. Boost 1.74's awaitable.hpp uses std::exchange without
// including <utility>; include it first so every translation unit builds the same way.
#pragma once
#include <utility>
#include <boost/asio.hpp>

namespace fabperf {
namespace asio = boost::asio;
using Tcp = boost::asio::ip::tcp;
using boost::system::error_code;
}  // namespace fabperf

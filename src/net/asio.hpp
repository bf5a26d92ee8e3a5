// One include point for Boost.Asio. Boost 1.74's awaitable.hpp uses std::exchange without
// including <utility>; include it first so every translation unit builds the same way.
#pragma once
#include <utility>

#include <boost/asio.hpp>
#include <string>

namespace fabperf {
namespace asio = boost::asio;
using Tcp = boost::asio::ip::tcp;
using boost::system::error_code;

// A dual-stack listener sees IPv4 peers as IPv4-mapped IPv6 (::ffff:a.b.c.d): unwrap them.
inline asio::ip::address unmapped(const asio::ip::address& a) {
  if (a.is_v6() && a.to_v6().is_v4_mapped()) return asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6());
  return a;
}
inline std::string numeric_address(const asio::ip::address& a) {
  return unmapped(a).to_string();
}
}  // namespace fabperf

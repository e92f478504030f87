// Whether an IP address belongs to this host, answered by the kernel's routing tables.
#pragma once

#include <sys/socket.h>

namespace uiw::transport {

// True if the kernel routes `addr` (IPv4, IPv6 or IPv4-mapped IPv6; the port is ignored) to
// this host: its route is of type RTN_LOCAL, as `ip route get` would show ("local ..."). Asks
// over rtnetlink through libnl, as libibverbs does for its own route and neighbour lookups, so
// one request answers however many addresses the host has. False when the address has no
// local route, is of another family, or the kernel cannot be asked.
bool is_local_address(const sockaddr* addr);

}  // namespace uiw::transport

// Socket helpers for host tests, tools and benchmarks (production sockets come from uiw.ko).
// Each returns a file descriptor (>= 0, close-on-exec, blocking mode) or -errno.
#pragma once

#include <sys/socket.h>

#include <cstdint>

namespace uiw::transport {

// Listening TCP socket on ip ("127.0.0.1", "::1", "0.0.0.0", ...) and port (0 = ephemeral).
// SO_REUSEADDR is set. *bound_port (may be null) receives the port actually bound.
int tcp_listen(const char* ip, uint16_t port, uint16_t* bound_port);

// Accepts one connection; -ETIMEDOUT after timeout_ms (< 0 waits forever).
int tcp_accept(int lfd, int timeout_ms);

// Connects to ip:port; -ETIMEDOUT after timeout_ms (< 0 waits forever), -ECONNREFUSED, ...
int tcp_connect(const char* ip, uint16_t port, int timeout_ms);

// Fills an IPv4 or IPv6 socket address from a numeric string; 0 or -EINVAL.
int make_addr(const char* ip, uint16_t port, sockaddr_storage* ss, socklen_t* len);

// poll() one fd for `events`; 0 ready, -ETIMEDOUT, or -errno.
int wait_fd(int fd, short events, int timeout_ms);

// Closes fd abortively and sets it to -1 (no-op when already -1): RFC 5040 §6 / RFC 5041 §6
// abortive termination of the LLP stream; linger {on, 0} makes close() discard unsent data and
// reset the connection (TCP RST, SCTP ABORT) instead of shutting it down gracefully.
void abortive_close(int& fd);

}  // namespace uiw::transport

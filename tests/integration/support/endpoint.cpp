#include "integration/support/endpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "transport/socket_util.h"

namespace uiw::test {

void fill(std::vector<uint8_t>& v, uint32_t seed) {
  uint32_t x = seed * 2654435761u + 1;
  for (auto& b : v) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b = static_cast<uint8_t>(x);
  }
}

Listener::Listener() {
  fd = transport::tcp_listen("127.0.0.1", 0, &port);
}
Listener::~Listener() {
  if (fd >= 0) ::close(fd);
}

transport::MpaConfig to_config(const LinkOptions& o) {
  transport::MpaConfig c;
  c.revision = o.revision;
  c.crc = o.crc;
  c.markers_rx = o.markers_rx;
  c.ird = o.ird;
  c.ord = o.ord;
  c.rtr = o.rtr;
  return c;
}

memory::Stag Endpoint::reg(void* p, size_t len, uint32_t access) {
  int err = 0;
  const memory::Stag s = HostEndpoint::reg(p, len, access, &err);
  EXPECT_NE(s, 0u) << "register_region: " << err;
  return s;
}

std::vector<engine::Completion> Endpoint::wait(bool send, size_t n, int timeout_ms) {
  std::vector<engine::Completion> out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  engine::Completion buf[64];
  while (out.size() < n) {
    const std::span<engine::Completion> s{buf, std::min<size_t>(64, n - out.size())};
    const size_t got = send ? poll_send(s) : poll_recv(s);
    out.insert(out.end(), buf, buf + got);
    if (got) continue;
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "timeout: " << out.size() << " of " << n << " completions, qp state "
                    << engine::qp_state_name(state());
      break;
    }
    if (busy_poll())
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return out;
}

std::vector<engine::Completion> Endpoint::wait_send(size_t n, int t) {
  return wait(true, n, t);
}
std::vector<engine::Completion> Endpoint::wait_recv(size_t n, int t) {
  return wait(false, n, t);
}

bool Endpoint::wait_error(int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (state() != engine::QpState::Error) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    if (busy_poll()) progress();
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return true;
}

}  // namespace uiw::test

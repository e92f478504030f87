// Integration-test endpoint: runtime::HostEndpoint plus waits that fail the calling test on
// timeout. Connected over real loopback TCP with MPA negotiated on the socket.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/host_endpoint.h"

namespace uiw::test {

struct LinkOptions {
  uint8_t revision = 2;
  bool crc = true;
  bool markers_rx = false;  // ask the peer to insert markers toward us
  uint16_t ird = 16, ord = 16;
  transport::RtrType rtr = transport::RtrType::Write;
};
transport::MpaConfig to_config(const LinkOptions& o);

class Endpoint : public runtime::HostEndpoint {
 public:
  explicit Endpoint(uint32_t qpn, bool progress_thread = true)
      : HostEndpoint(qpn, progress_thread) {}
  Endpoint(uint32_t qpn, runtime::Progress& shared) : HostEndpoint(qpn, shared) {}
  int connect(uint16_t port, const LinkOptions& o) {
    return HostEndpoint::connect("127.0.0.1", port, to_config(o));
  }
  int accept(int listen_fd, const LinkOptions& o) {
    return HostEndpoint::accept(listen_fd, to_config(o));
  }
  memory::Stag reg(void* p, size_t len, uint32_t access);
  memory::Stag reg(std::vector<uint8_t>& v, uint32_t access) {
    return reg(v.data(), v.size(), access);
  }
  // Wait for n completions; on timeout the calling test fails and what arrived is returned.
  std::vector<engine::Completion> wait_send(size_t n, int timeout_ms = 20000);
  std::vector<engine::Completion> wait_recv(size_t n, int timeout_ms = 20000);
  bool wait_error(int timeout_ms = 20000);  // until the Qp is in Error
  uint32_t mulpdu() { return qp().params().mulpdu; }

 private:
  std::vector<engine::Completion> wait(bool send, size_t n, int timeout_ms);
};

// A listening socket on 127.0.0.1 with an ephemeral port.
struct Listener {
  Listener();
  ~Listener();
  int fd = -1;
  uint16_t port = 0;
};

inline engine::Sge sge(std::vector<uint8_t>& v, memory::Stag k, size_t off = 0,
                       size_t len = SIZE_MAX) {
  if (len == SIZE_MAX) len = v.size() - off;
  return {reinterpret_cast<uint64_t>(v.data() + off), static_cast<uint32_t>(len), k};
}
void fill(std::vector<uint8_t>& v, uint32_t seed);

}  // namespace uiw::test

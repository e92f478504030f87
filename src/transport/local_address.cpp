#include "transport/local_address.h"

#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>

#include <cstring>
#include <memory>

namespace uiw::transport {

namespace {

struct SocketFree {
  void operator()(nl_sock* s) const { nl_socket_free(s); }
};
struct MsgFree {
  void operator()(nl_msg* m) const { nlmsg_free(m); }
};

// The RTM_NEWROUTE answer to our RTM_GETROUTE: its rtm_type says whether the route is local.
int on_route(nl_msg* msg, void* arg) {
  const nlmsghdr* h = nlmsg_hdr(msg);
  if (h->nlmsg_type == RTM_NEWROUTE && nlmsg_datalen(h) >= int(sizeof(rtmsg)))
    *static_cast<bool*>(arg) = static_cast<const rtmsg*>(nlmsg_data(h))->rtm_type == RTN_LOCAL;
  return NL_OK;
}

}  // namespace

bool is_local_address(const sockaddr* addr) {
  if (!addr) return false;
  int family = addr->sa_family;
  const void* ip = nullptr;
  size_t ip_len = 0;
  in_addr mapped{};
  if (family == AF_INET) {
    ip = &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr;
    ip_len = sizeof(in_addr);
  } else if (family == AF_INET6) {
    const in6_addr& a6 = reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(&a6)) {
      // A dual-stack socket's IPv4 peer: the IPv4 tables know it, the IPv6 ones do not.
      std::memcpy(&mapped, &a6.s6_addr[12], sizeof(mapped));
      family = AF_INET;
      ip = &mapped;
      ip_len = sizeof(in_addr);
    } else {
      ip = &a6;
      ip_len = sizeof(in6_addr);
    }
  } else {
    return false;
  }

  std::unique_ptr<nl_sock, SocketFree> sk(nl_socket_alloc());
  if (!sk || nl_connect(sk.get(), NETLINK_ROUTE)) return false;
  std::unique_ptr<nl_msg, MsgFree> msg(nlmsg_alloc_simple(RTM_GETROUTE, NLM_F_REQUEST));
  if (!msg) return false;
  rtmsg rt{};
  rt.rtm_family = static_cast<unsigned char>(family);
  rt.rtm_dst_len = static_cast<unsigned char>(ip_len * 8);
  if (nlmsg_append(msg.get(), &rt, sizeof(rt), NLMSG_ALIGNTO) ||
      nla_put(msg.get(), RTA_DST, static_cast<int>(ip_len), ip) ||
      nl_send_auto(sk.get(), msg.get()) < 0)
    return false;
  bool local = false;
  nl_socket_modify_cb(sk.get(), NL_CB_VALID, NL_CB_CUSTOM, on_route, &local);
  // An address with no route at all comes back as an error (ENETUNREACH): not local.
  if (nl_recvmsgs_default(sk.get()) < 0) return false;
  return local;
}

}  // namespace uiw::transport

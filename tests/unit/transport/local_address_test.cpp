#include "transport/local_address.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <cstring>

namespace uiw::transport {
namespace {

sockaddr_storage v4(const char* ip) {
  sockaddr_storage ss{};
  auto* in = reinterpret_cast<sockaddr_in*>(&ss);
  in->sin_family = AF_INET;
  EXPECT_EQ(inet_pton(AF_INET, ip, &in->sin_addr), 1);
  return ss;
}

sockaddr_storage v6(const char* ip) {
  sockaddr_storage ss{};
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&ss);
  in6->sin6_family = AF_INET6;
  EXPECT_EQ(inet_pton(AF_INET6, ip, &in6->sin6_addr), 1);
  return ss;
}

const sockaddr* sa(const sockaddr_storage& ss) {
  return reinterpret_cast<const sockaddr*>(&ss);
}

TEST(LocalAddressTest, LoopbackAddressesAreLocal) {
  EXPECT_TRUE(is_local_address(sa(v4("127.0.0.1"))));
  // The whole of 127.0.0.0/8 is a local route, not only the address lo carries.
  EXPECT_TRUE(is_local_address(sa(v4("127.3.4.5"))));
  EXPECT_TRUE(is_local_address(sa(v6("::ffff:127.0.0.1"))));
}

// Every address an interface of this host carries is local, as getifaddrs lists them.
TEST(LocalAddressTest, EveryInterfaceAddressIsLocal) {
  ifaddrs* list = nullptr;
  ASSERT_EQ(getifaddrs(&list), 0);
  int checked = 0;
  for (const ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr, text,
              sizeof(text));
    EXPECT_TRUE(is_local_address(i->ifa_addr)) << i->ifa_name << " " << text;
    ++checked;
  }
  freeifaddrs(list);
  EXPECT_GT(checked, 0);
}

TEST(LocalAddressTest, OtherAddressesAreNot) {
  // TEST-NET-1 (RFC 5737) and the IPv6 documentation prefix (RFC 3849): never a host's own.
  EXPECT_FALSE(is_local_address(sa(v4("192.0.2.77"))));
  EXPECT_FALSE(is_local_address(sa(v6("2001:db8::77"))));
  EXPECT_FALSE(is_local_address(sa(v6("::ffff:192.0.2.77"))));
}

TEST(LocalAddressTest, NonIpAndNullAreNot) {
  sockaddr_storage un{};
  un.ss_family = AF_UNIX;
  EXPECT_FALSE(is_local_address(sa(un)));
  EXPECT_FALSE(is_local_address(nullptr));
}

}  // namespace
}  // namespace uiw::transport

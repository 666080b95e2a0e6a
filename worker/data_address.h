// Which address this worker's data plane binds to and publishes to its
// peers. Picking the wrong interface is the classic multi-host failure (the
// peers dial an address that is only reachable from this host, like
// 127.0.0.1 or a docker bridge), so the choice is explicit and logged:
//   --data-addr HOST   exactly this address;
//   --iface NAME       the IPv4 address of that interface;
//   neither            127.0.0.1 when the coordinator is on this host, else
//                      the address of the interface on the route to the
//                      coordinator (the kernel's choice for a UDP connect).
#pragma once

#include <string>

namespace mddp::worker {

struct DataAddress {
  std::string addr;  // what to bind and publish
  std::string how;   // why this one, for the log line
};

// Throws InputError for an unknown interface (listing the ones there are) or
// a coordinator address that does not resolve.
DataAddress choose_data_address(const std::string& coordinator, const std::string& data_addr,
                                const std::string& iface);

// "lo 127.0.0.1, eth0 10.0.0.2": this host's IPv4 interfaces.
std::string list_interfaces();

}  // namespace mddp::worker

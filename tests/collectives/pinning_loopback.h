// "pinning-loopback": the loopback transport, except that it says its
// registrations pin pages (Transport::registration_pins, as verbs does) and
// counts them. The communicator must then place a caller's buffer as for
// RDMA (registry.cc: staged through scratch, registered for the call, or
// inside an explicit registration), so those paths run in every unit test
// run, under the sanitizers, without a device. Registered when a test binary
// that links pinning_loopback.cc starts.
#pragma once

#include <cstdint>

namespace weft::coll::testing {

// True once the transport is registered (at static initialisation).
bool pinning_loopback_registered();
// register_memory calls of every pinning-loopback transport so far.
uint64_t pinning_loopback_registrations();

}  // namespace weft::coll::testing

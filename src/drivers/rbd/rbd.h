// The Ceph RBD driver ("rbd"): an RBD image through librbd's asynchronous C
// API. Everything a user needs goes through blkmq::create_device("rbd",
// params); this header only exists so that a static link keeps the driver
// (see builtin.cc). Built only where librbd and librados are installed
// (BLKMQ_HAVE_RBD).
#pragma once

namespace blkmq {

// Makes sure the "rbd" driver is registered. Idempotent and thread-safe;
// registers the first time only (same contract as null_driver_link()).
void rbd_driver_link();

}  // namespace blkmq

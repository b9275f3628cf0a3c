// The null block device driver ("null", the null_blk analogue). Everything a
// user needs goes through blkmq::create_device("null", params); this header
// only exists so that the core can force the driver into a static link.
#pragma once

namespace blkmq {

// Makes sure the "null" driver is registered. The driver registers itself
// from a static initializer, but a linker drops an unreferenced object file
// of a static library together with its initializers; create_device() calls
// this so the object is always linked. Idempotent and thread-safe; it calls
// register_device_driver() the first time only, so do not call it while
// holding the driver registry's lock before static initialization is done.
void null_driver_link();

}  // namespace blkmq

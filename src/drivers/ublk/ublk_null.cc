// The built-in null target: every I/O completes at once, from the server
// thread, moving no data. What `blkmq bench --driver=ublk` measures by
// default: the cost of the hand-off and the completion path alone.
#include "drivers/ublk/ublk_targets.h"

namespace blkmq::ublkd {
namespace {

class NullTarget final : public UblkTarget {
 public:
  void handle(UblkIo& io) override { io.complete(BlkStatus::ok); }
};

}  // namespace

std::unique_ptr<UblkTarget> make_null_target() { return std::make_unique<NullTarget>(); }

}  // namespace blkmq::ublkd

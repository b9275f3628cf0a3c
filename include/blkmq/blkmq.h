// Umbrella header for the blkmq library.
#pragma once

#include "blkmq/bio.h"
#include "blkmq/context.h"
#include "blkmq/device.h"
#include "blkmq/driver.h"
#include "blkmq/elevator.h"
#include "blkmq/ioctx.h"
#include "blkmq/plug.h"
#include "blkmq/queue.h"
#include "blkmq/request.h"
#include "blkmq/status.h"
#include "blkmq/tagset.h"
#include "blkmq/threads.h"

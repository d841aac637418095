/* driver.h - the C side of beck.testing's test driver: the real stores
 * (store.c, RocksDB on disk) of a topology's tasks, without Kafka. The
 * driver's Lua (lua/beck/testing.lua) stands in for the topics and the
 * clock; everything it calls here is in ffi.h (bk_ffi_driver_*). Changelog
 * records are not produced (there is no broker); commit still writes the
 * batches and checkpoints as a stream thread does. */
#ifndef BK_DRIVER_H
#define BK_DRIVER_H

#include "base/ffi.h"

#endif

/* cmd_dump.h - `beck dump`: prints the stores of a stopped node's tasks, read
 * straight from their RocksDB directories, one JSON object per line:
 * {"task":"0_3","store":"counts","key":"...","value":"..."}. For operators
 * and for specs that compare a store with its changelog. It also checks that
 * every key sits under its own key group, and says so when one does not. */
#ifndef BK_CMD_DUMP_H
#define BK_CMD_DUMP_H

int bk_cmd_dump_main(int argc, char **argv);

#endif

/* cmd_snapshot.h - `beck snapshot`: makes a snapshot (snapshot.h) of one task of a stopped
 * node, for operators seeding a replica by hand and for specs. It does not fetch or
 * install snapshots. */
#ifndef BK_CMD_SNAPSHOT_H
#define BK_CMD_SNAPSHOT_H

int bk_cmd_snapshot_main(int argc, char **argv);

#endif

/* snapshotcmd.h - `beck snapshot`: makes a snapshot (snapshot.h) of one task of a stopped
 * node, for operators seeding a replica by hand and for specs. It does not fetch or
 * install snapshots. */
#ifndef BK_SNAPSHOTCMD_H
#define BK_SNAPSHOTCMD_H

int bk_snapshotcmd_main(int argc, char **argv);

#endif

/* cmd_status.h - `beck status`: prints an app's cluster as its control topic shows it (nodes,
 * epoch, leader, every task's active, holder, standbys and progress), as text or JSON. It
 * reads the topic as an observer (member.h) and writes nothing: not to the topic, not to
 * the app's consumer group. */
#ifndef BK_CMD_STATUS_H
#define BK_CMD_STATUS_H

/* argv[0] is "status". Returns the process exit status: 0, 1 (no control topic, not read in
 * time, bad topology) or 2 (bad arguments). */
int bk_cmd_status_main(int argc, char **argv);

#endif

/* cmd_repartition.h - `beck repartition`: asks a running app to move a subtopology to another
 * task count (docs/repartitioning.md), through a note on the app's control topic that its
 * leader checks and turns into a move; waits until the move is on the control topic. */
#ifndef BK_CMD_REPARTITION_H
#define BK_CMD_REPARTITION_H

int bk_cmd_repartition_main(int argc, char **argv);

#endif

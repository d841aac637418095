/* cmd_describe.h - `beck describe TOPOLOGY.lua`: prints the subtopologies,
 * processors, stores and topics a topology will use, without touching Kafka
 * (the text comes from lua/beck/internal/describe.lua). */
#ifndef BK_CMD_DESCRIBE_H
#define BK_CMD_DESCRIBE_H

int bk_cmd_describe_main(int argc, char **argv);

#endif

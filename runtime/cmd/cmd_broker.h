/* cmd_broker.h - `beck broker [--brokers N] [--racks a,b,c] [--topic NAME:PARTITIONS]...`:
 * prints the bootstrap address as its first line and runs until SIGINT or
 * SIGTERM, which also stop it while it is starting (within milliseconds).
 * argv[0] is the subcommand ("broker"), options follow. Blocks SIGINT and
 * SIGTERM in the calling thread before starting any thread, so call it before
 * the process has other threads. Returns the process exit status: 0 (after a
 * signal), 1 (cluster failed to start) or 2 (usage error). */
#ifndef BK_CMD_BROKER_H
#define BK_CMD_BROKER_H

int bk_cmd_broker_main(int argc, char **argv);

#endif

/* cmd_fetch.h - `beck fetch`: fetches a snapshot (its manifest, then its files) from a
 * host's sshd over SFTP into a local directory and verifies it (sftp.h). It does not
 * install the snapshot into a node's state. */
#ifndef BK_CMD_FETCH_H
#define BK_CMD_FETCH_H

int bk_cmd_fetch_main(int argc, char **argv);

#endif

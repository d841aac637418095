/* cmd_test.h - `beck test [busted options] [PATH...]`: runs Debian's busted
 * inside beck's own VM, so specs see the same modules, FFI and C engine as
 * production, and ends with one line "N passed, N failed, N skipped". */
#ifndef BK_CMD_TEST_H
#define BK_CMD_TEST_H

/* Returns the exit status: 0 when every spec passed. */
int bk_cmd_test_main(int argc, char **argv);

#endif

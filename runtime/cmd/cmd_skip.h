/* cmd_skip.h - `beck skip`: lists a poison record in <app>-skips (engine/skips.h), so that the
 * app's tasks go past it, after copying it to <app>-dlq if asked. */
#ifndef BK_CMD_SKIP_H
#define BK_CMD_SKIP_H

int bk_cmd_skip_main(int argc, char **argv);

#endif

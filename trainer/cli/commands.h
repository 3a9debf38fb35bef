/* SPDX-License-Identifier: Apache-2.0 */
/* commands: the dltrain subcommands, each a main-like function. */
#ifndef DLT_CLI_COMMANDS_H
#define DLT_CLI_COMMANDS_H

int dlt_cmd_env(int argc, char **argv);
int dlt_cmd_train(int argc, char **argv); /* train, eval, bench */
int dlt_cmd_info(int argc, char **argv);
int dlt_cmd_data(int argc, char **argv); /* data pack */
int dlt_cmd_check(int argc, char **argv);

#endif

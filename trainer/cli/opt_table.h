/* SPDX-License-Identifier: Apache-2.0 */
/* opt_table: every option of every dltrain command in one table (name, argument, range, the field
 * it sets, its help text, the commands that read it), which the parser and --help read. */
#ifndef DLT_CLI_OPT_TABLE_H
#define DLT_CLI_OPT_TABLE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/status.h"
#include "trainer/check/check.h"
#include "trainer/cli/model_from_checkpoint.h"
#include "trainer/train/trainer.h"

/* The commands, as bits: an option's scope says which of them read it. */
enum {
    DLT_CMD_TRAIN = 1,
    DLT_CMD_EVAL = 2,
    DLT_CMD_BENCH = 4,
    DLT_CMD_INFO = 8,
    DLT_CMD_DATA = 16, /* data pack */
    DLT_CMD_ENV = 32,
    DLT_CMD_CHECK = 64,
};
/* train, eval and bench take one option set (job scripts share it): an option of the set that the
 * command does not read is warned about, not refused. The other commands refuse options not theirs. */
#define DLT_CMD_RUNS (DLT_CMD_TRAIN | DLT_CMD_EVAL | DLT_CMD_BENCH)

/* Everything the options of all commands set. */
typedef struct {
    dlt_train_config train; /* train, eval, bench; its model also info's */
    dlt_bench_config bench;
    dlt_model_given given;             /* which model options the command line gave */
    const char *comm;                  /* --comm */
    const char *checkpoint;            /* --checkpoint */
    double timeout;                    /* --timeout (0: the default) */
    int verify;                        /* --verify */
    int layers, state_dict;            /* info */
    int resize, quality, quiet, force; /* data pack */
    const char *labels;                /* data pack */
    int preflight;                     /* train --preflight: 0 none, 1 quick, 2 full */
    dlt_check_config check;            /* check */
} dlt_cli_opts;

typedef enum {
    DLT_ARG_NONE,   /* a switch */
    DLT_ARG_WHOLE,  /* a whole number in [lo, hi] */
    DLT_ARG_REAL,   /* a finite real number in [lo, hi] */
    DLT_ARG_CHOICE, /* one of the words of choices ("a|b|c") */
    DLT_ARG_TEXT,   /* any text (a path, a list the handler checks) */
} dlt_arg_kind;

/* An argument as the parser checked it. */
typedef struct {
    const char *text; /* as given (NULL for a switch) */
    int64_t whole;    /* WHOLE: the number; CHOICE: the word's position among the choices */
    double real;      /* REAL: the number */
} dlt_opt_arg;

typedef struct dlt_opt dlt_opt;
/* Stores the checked argument into o. Returns 0, or -EINVAL with err filled. */
typedef int (*dlt_opt_set)(const dlt_opt *opt, dlt_cli_opts *o, const dlt_opt_arg *a, dlt_err *err);

enum {
    DLT_OPT_CUDA_ONLY = 1,    /* flags: refused on the CPU backend, which would not do what it asks */
    DLT_OPT_OPTIONAL_ARG = 2, /* --name or --name=ARG; without ARG the setter gets the first choice */
};

struct dlt_opt {
    const char *name; /* without the leading "--" */
    dlt_arg_kind kind;
    const char *arg;     /* the argument as --help and the man page name it ("N", "PATH"); NULL: none */
    double lo, hi;       /* WHOLE, REAL */
    const char *choices; /* CHOICE: "auto|cpu|cuda" */
    size_t field;        /* offsetof(dlt_cli_opts, ...) the generic setters write */
    dlt_opt_set set;     /* stores the value */
    unsigned cmds;       /* DLT_CMD_* bits: the commands that read it */
    unsigned flags;      /* DLT_OPT_* */
    const char *section; /* --help's heading */
    const char *help;    /* --help's text; "\n" starts an indented continuation line */
};

/* The most entries the table may hold: the size of a seen[] array. */
#define DLT_OPT_MAX 128

/* The table, and its length. */
const dlt_opt *dlt_opt_table(size_t *count);

/* The DLT_CMD_* bit of a command name ("train", "data"...), or 0 when there is none. */
unsigned dlt_cmd_bit(const char *cmd);

/* Parses argv[first..] for command cmd (a DLT_CMD_* bit) into o (which the caller filled with the
 * defaults): each option is the table's entry of that name whose scope meets cmd's option set;
 * seen[i] is set for the table's entry i given (seen holds the table's count). Numbers and choices
 * are checked in full. Returns 0; 1 when --help was given (the caller prints dlt_opt_usage to
 * stdout); -EINVAL on a usage error with err filled ("--batch x: not a whole number ..."), or empty
 * when getopt already said it (an unknown option, a missing argument). *next is the index of the
 * first operand. */
int dlt_opt_parse(unsigned cmd, int argc, char **argv, int first, dlt_cli_opts *o, unsigned char *seen, int *next,
                  dlt_err *err);

/* dlt_opt_parse and what every command does with its result: --help printed to stdout (returns 0),
 * a usage error said (returns 2; after getopt's own line, the usage too when usage_after_getopt),
 * and, when name is given ("check"), an operand refused as "dltrain NAME: unexpected argument 'X'"
 * (returns 2). Returns -1 when the command goes on with o, seen and *next filled. */
int dlt_opt_parse_command(unsigned cmd, const char *name, int argc, char **argv, int first, dlt_cli_opts *o,
                          unsigned char *seen, int *next, int usage_after_getopt);

/* `dltrain CMD --help`: the synopsis, then every option of cmd's option set from the table. */
void dlt_opt_usage(FILE *f, unsigned cmd);

/* The options given (seen) that command cmd does not read, as "--a, --b" (empty: none). */
void dlt_opt_unread(unsigned cmd, const unsigned char *seen, char *list, size_t len);

/* The CUDA-only options given, as "--a, --b" (empty: none). */
void dlt_opt_cuda_only(const unsigned char *seen, char *list, size_t len);

/* The table index of the entry named name in cmd's option set, or -1. */
int dlt_opt_find(unsigned cmd, const char *name);

#endif

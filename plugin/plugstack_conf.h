/* SPDX-License-Identifier: Apache-2.0 */
/* plugstack_conf: plugstack.conf read the way Slurm 22.05 reads it, to find the lines that load one
 * plugin (file and line, its arguments), following include globs; and where that file is. */
#ifndef DLT_PLUGIN_PLUGSTACK_CONF_H
#define DLT_PLUGIN_PLUGSTACK_CONF_H

#include <stddef.h>

#include "common/status.h"

/* Slurm reads each line with fgets into a 4096-byte buffer: a longer line is read as several. */
#define DLT_PS_LINE_MAX 4096
#define DLT_PS_PATH_MAX 1024
#define DLT_PS_ARGS_MAX 64    /* arguments kept per line; more are counted and refused by the check */
#define DLT_PS_HITS_MAX 8     /* lines kept; more are counted */
#define DLT_PS_DEPTH_MAX 8    /* files nested through includes, the first one counted (Slurm has no bound) */
#define DLT_PS_FILES_MAX 256  /* files read in one scan */
#define DLT_PS_NOTES_MAX 4096 /* remarks kept, cut with "..." */

/* The plugin file Slurm loads for dltrain, matched by the base name of a line's path. */
#define DLT_PS_PLUGIN_NAME "spank_dltrain.so"

typedef enum { DLT_PS_BLANK = 0, DLT_PS_REQUIRED, DLT_PS_OPTIONAL, DLT_PS_INCLUDE, DLT_PS_INVALID } dlt_ps_type;

/* One line split as Slurm splits it: the first word, the path (or include pattern), the
 * arguments. Points into the caller's buffer, which is modified. */
typedef struct {
    dlt_ps_type type;
    const char *word; /* the first word; for DLT_PS_INVALID the one Slurm refused */
    const char *path; /* NULL when the line has none (DLT_PS_INVALID) */
    int argc;         /* arguments kept in argv (at most DLT_PS_ARGS_MAX) */
    int argc_total;   /* arguments on the line */
    char *argv[DLT_PS_ARGS_MAX + 1];
} dlt_ps_words;

/* Splits one line (at most DLT_PS_LINE_MAX - 1 bytes, NUL-terminated) in place. */
void dlt_plugstack_split(char *line, dlt_ps_words *w);

/* A line that loads the plugin. */
typedef struct {
    char file[DLT_PS_PATH_MAX]; /* as Slurm opened it (an include's glob match) */
    int line;                   /* the line number an editor shows */
    int required;               /* required (1) or optional (0) */
    char path[DLT_PS_PATH_MAX];
    int argc, argc_total; /* argc_total > argc: more than DLT_PS_ARGS_MAX arguments */
    char *argv[DLT_PS_ARGS_MAX + 1];
    char args[DLT_PS_LINE_MAX]; /* argv's strings */
} dlt_plugstack_hit;

typedef struct {
    const char *plugin;  /* base name to find (DLT_PS_PLUGIN_NAME) */
    int follow_includes; /* 0: include lines are noted, not followed */
    dlt_plugstack_hit hits[DLT_PS_HITS_MAX];
    int nhits;  /* kept in hits */
    int nfound; /* found, counting those beyond DLT_PS_HITS_MAX */
    int nfiles; /* files read */
    /* Slurm would refuse the whole stack (a file it cannot read): every step fails; or this scan
     * stopped at one of its own bounds, so lines may be missing. Said in notes. */
    int broken;
    char notes[DLT_PS_NOTES_MAX]; /* one "FILE:LINE: words" per line, names escaped */
    size_t notes_len;
    int notes_cut; /* notes ended with "..." */
} dlt_plugstack_scan;

/* A scan looking for plugin (a base name such as DLT_PS_PLUGIN_NAME), empty. */
void dlt_plugstack_scan_init(dlt_plugstack_scan *s, const char *plugin, int follow_includes);

/* text (len bytes, any bytes) read as the contents of file, which names it in hits and notes and
 * is where relative include patterns start. */
void dlt_plugstack_scan_text(dlt_plugstack_scan *s, const char *file, const char *text, size_t len);

/* The file read and scanned. A missing file is an empty one to Slurm: noted, returns -ENOENT; one
 * that is not a regular file is noted and not read (0); any other failure to open it makes the scan
 * broken (Slurm fails the whole stack) and returns its -errno. */
int dlt_plugstack_scan_file(dlt_plugstack_scan *s, const char *file);

/* The index in s->hits of the line whose arguments are exactly argv (the line this copy of the
 * plugin was loaded from), or -1. */
int dlt_plugstack_find_args(const dlt_plugstack_scan *s, int argc, char *const argv[]);

/* The PlugStackConfig value of slurm.conf text (the last one, as Slurm takes it) into out; 0, or
 * -ENOENT when the text has none, -ENAMETOOLONG when it does not fit. */
int dlt_slurm_conf_plugstack(const char *text, size_t len, char *out, size_t outlen);

/* The plugstack file Slurm reads: PlugStackConfig from slurm.conf (slurm_conf: its path, as
 * SLURM_CONF gives it; NULL: SYSCONFDIR/slurm.conf), else plugstack.conf beside slurm.conf.
 * Writes how it was found to how (may be NULL). Returns 0 or a negative errno with err filled. */
int dlt_plugstack_default_path(const char *slurm_conf, const char *sysconfdir, char *out, size_t outlen, char *how,
                               size_t howlen, dlt_err *err);

/* Where the line this copy of the plugin was loaded from is (its arguments argv): "FILE:LINE" in
 * out, names escaped, and 0; or -ENOENT and out saying where it was looked for and why it was not
 * found (configless Slurm, a node whose files differ). slurm_conf and sysconfdir as for dlt_plugstack_default_path.
 * Reads files: for error paths. */
int dlt_plugstack_where(int argc, char *const argv[], const char *slurm_conf, const char *sysconfdir, char *out,
                        size_t outlen);

#endif

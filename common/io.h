/* SPDX-License-Identifier: Apache-2.0 */
/* io: small file I/O helpers shared by the checkpoint writer and reader, the RecordIO packer and
 * the image reader. */
#ifndef DLT_IO_H
#define DLT_IO_H

#include "common/status.h"
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

/* Writes all n bytes, retrying on EINTR and short writes. Returns 0 or -1 with errno set. */
int dlt_write_all(int fd, const void *p, size_t n);

/* Reads up to n bytes, retrying on EINTR and short reads; returns how many were read (fewer at end
 * of file or on an error, errno then set). */
size_t dlt_read_full(int fd, void *p, size_t n);

/* A file type in words for a refusal: "a FIFO", "a directory", "a character device"... */
const char *dlt_file_kind(mode_t mode);

/* Opens a file the user named (an option's value, a data file) as open(2) does, but never blocks
 * on a FIFO or a device: O_NONBLOCK while opening, then the file must be a regular file (a FIFO,
 * a device, a socket or a directory is refused by name); O_NONBLOCK is cleared before returning
 * and O_CLOEXEC added. what names the option ("--init") or is NULL. Returns the descriptor, or a
 * negative errno with err filled: "--init /x: a FIFO, not a regular file", "--init /x: No such
 * file or directory". */
int dlt_open_regular(const char *what, const char *path, int flags, mode_t mode, dlt_err *err);

/* The same as a stdio stream; fmode is "r", "w" or "a" (with an optional "b"). NULL with err
 * filled and errno set on failure. */
FILE *dlt_fopen_regular(const char *what, const char *path, const char *fmode, dlt_err *err);

/* A path that must exist, as a directory (want_dir) or else a regular file, checked without
 * opening it (before anything starts). Returns 0, or a negative errno with err filled as above
 * ("--val-data /x: No such file or directory", "--data /x: a regular file, not a directory"). */
int dlt_check_path(const char *what, const char *path, int want_dir, dlt_err *err);

/* The folder a file is to be written in (path's parent) must exist as a directory: a file's folder
 * is never created (a typo in it would scatter outputs), while a directory option (--checkpoint-dir,
 * --tensorboard) is created with its parents. Returns 0, or a negative errno with err filled:
 * "--metrics /x/m.jsonl: its folder /x does not exist: create it (mkdir -p /x) or name another". */
int dlt_check_parent_dir(const char *what, const char *path, dlt_err *err);

/* mkdir -p: creates path and its missing parents (0755). Returns 0 (also when it exists as a
 * directory) or -1 with errno set. */
int dlt_mkdirs(const char *path);

/* Writes len bytes as path through a temporary name beside it (path.tmp.PID, created exclusively):
 * written, flushed to disk, then renamed over path, so that path holds either its old contents or
 * all of the new ones; the temporary file goes on any failure. Returns 0 or a negative errno with
 * err filled ("cannot write X: No space left on device"). */
int dlt_write_file_atomic(const char *path, const void *data, size_t len, mode_t mode, dlt_err *err);

#endif

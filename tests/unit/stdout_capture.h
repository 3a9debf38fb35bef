/* SPDX-License-Identifier: Apache-2.0 */
/* stdout_capture: a unit test's stdout into a file while the code under test prints (include after
 * cmocka.h), and back. */
#ifndef DLT_TEST_STDOUT_CAPTURE_H
#define DLT_TEST_STDOUT_CAPTURE_H

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

/* stdout into path (made or emptied) until stdout_capture_end; returns the saved descriptor. */
static inline int stdout_capture_begin(const char *path)
{
    int saved, fd;
    fflush(stdout);
    saved = dup(1);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0 && saved >= 0);
    assert_int_equal(dup2(fd, 1), 1);
    close(fd);
    return saved;
}

static inline void stdout_capture_end(int saved)
{
    fflush(stdout);
    assert_int_equal(dup2(saved, 1), 1);
    close(saved);
}

#endif

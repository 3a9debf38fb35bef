/* SPDX-License-Identifier: Apache-2.0 */
/* tmp_dir: a fresh folder under /tmp for one unit test (include after cmocka.h), and its removal
 * with everything in it. */
#ifndef DLT_TEST_TMP_DIR_H
#define DLT_TEST_TMP_DIR_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A new folder /tmp/dlt-test-NAME.XXXXXX; the caller frees it with tmp_dir_remove. */
static inline char *tmp_dir_make(const char *name)
{
    char *d = malloc(strlen(name) + 32);
    assert_non_null(d);
    sprintf(d, "/tmp/dlt-test-%s.XXXXXX", name);
    assert_non_null(mkdtemp(d));
    return d;
}

static inline void tmp_dir_remove(char *d)
{
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d);
    assert_int_equal(system(cmd), 0);
    free(d);
}

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* The option table against what documents it: every option has help text, each command's --help
 * lists exactly the options of its set, and man/dltrain.1 describes exactly the table's options
 * (the tag lines of its COMMANDS and OPTIONS items). DLT_SRCDIR names the source tree. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/status.h"
#include "trainer/cli/opt_table.h"

static const char *const g_cmd_names[] = {"train", "eval", "bench", "info", "data", "env", "check"};

/* A set of option names, "|name|name|...|". */
typedef struct {
    char s[8192];
} name_set;

static void _add(name_set *set, const char *name, size_t len)
{
    size_t n = strlen(set->s);
    if (!n)
        set->s[n++] = '|';
    snprintf(set->s + n, sizeof(set->s) - n, "%.*s|", (int)len, name);
}

static int _has(const name_set *set, const char *name)
{
    char key[96];
    snprintf(key, sizeof(key), "|%.80s|", name);
    return strstr(set->s, key) != NULL;
}

/* The names of the options of cmd's set, as the parser takes them. */
static void _table_names(unsigned cmd, name_set *set)
{
    size_t count;
    const dlt_opt *t = dlt_opt_table(&count);
    unsigned fam = cmd & DLT_CMD_RUNS ? DLT_CMD_RUNS : cmd;
    memset(set, 0, sizeof(*set));
    for (size_t i = 0; i < count; i++)
        if (t[i].cmds & fam)
            _add(set, t[i].name, strlen(t[i].name));
}

/* Every table entry is complete: help text, an argument name where it takes one, a range, choices,
 * a setter (--help aside), a command; no name twice in one command's set. */
static void test_entries_complete(void **state)
{
    size_t count;
    const dlt_opt *t = dlt_opt_table(&count);
    (void)state;
    assert_true(count > 0 && count <= DLT_OPT_MAX);
    for (size_t i = 0; i < count; i++) {
        print_message("# --%s\n", t[i].name);
        assert_non_null(t[i].name);
        assert_true(t[i].name[0] != 0 && t[i].name[0] != '-');
        assert_non_null(t[i].help);
        assert_true(strlen(t[i].help) > 3);
        assert_true(t[i].cmds != 0);
        assert_true((t[i].kind == DLT_ARG_NONE) == (t[i].arg == NULL));
        assert_true(t[i].set != NULL || !strcmp(t[i].name, "help"));
        if (t[i].kind == DLT_ARG_WHOLE || t[i].kind == DLT_ARG_REAL)
            assert_true(t[i].lo <= t[i].hi);
        if (t[i].kind == DLT_ARG_CHOICE)
            assert_true(t[i].choices && strchr(t[i].choices, '|'));
        for (size_t k = 0; k < i; k++)
            assert_false(!strcmp(t[k].name, t[i].name) &&
                         ((t[k].cmds & DLT_CMD_RUNS ? DLT_CMD_RUNS : t[k].cmds) & t[i].cmds));
    }
}

/* The options --help lists: the names on lines that start with "  --". */
static void _help_names(unsigned cmd, name_set *set)
{
    char *buf = NULL, *line;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    dlt_opt_usage(f, cmd);
    fclose(f);
    memset(set, 0, sizeof(*set));
    for (line = strtok(buf, "\n"); line; line = strtok(NULL, "\n"))
        if (!strncmp(line, "  --", 4))
            _add(set, line + 4, strcspn(line + 4, " [")); /* "--name[=A|B]": an optional argument */
    free(buf);
}

static void test_help_lists_the_table(void **state)
{
    (void)state;
    for (size_t c = 0; c < sizeof(g_cmd_names) / sizeof(g_cmd_names[0]); c++) {
        unsigned cmd = dlt_cmd_bit(g_cmd_names[c]);
        name_set table, help;
        assert_true(cmd != 0);
        _table_names(cmd, &table);
        _help_names(cmd, &help);
        print_message("# dltrain %s --help: %s\n", g_cmd_names[c], help.s);
        /* Same names, each once: the two sets are equal as strings only if the orders agree, so
         * compare both ways by membership. */
        for (char *p = table.s + 1; *p; p += strcspn(p, "|") + 1) {
            char name[80];
            snprintf(name, sizeof(name), "%.*s", (int)strcspn(p, "|"), p);
            if (!_has(&help, name))
                fail_msg("dltrain %s --help does not list --%s", g_cmd_names[c], name);
        }
        for (char *p = help.s + 1; *p; p += strcspn(p, "|") + 1) {
            char name[80];
            snprintf(name, sizeof(name), "%.*s", (int)strcspn(p, "|"), p);
            if (!_has(&table, name))
                fail_msg("dltrain %s --help lists --%s, which the table does not have", g_cmd_names[c], name);
        }
    }
}

/* The option names on the tag lines (the line after .TP) of man/dltrain.1's COMMANDS and OPTIONS
 * sections: "\-\-image\-size" is --image-size. */
static void _man_names(name_set *set)
{
    const char *src = getenv("DLT_SRCDIR");
    char path[4096], line[4096];
    int in_sections = 0, tag = 0;
    FILE *f;
    memset(set, 0, sizeof(*set));
    snprintf(path, sizeof(path), "%s/man/dltrain.1", src ? src : ".");
    f = fopen(path, "r");
    if (!f)
        fail_msg("cannot read %s (DLT_SRCDIR: the source tree)", path);
    while (fgets(line, sizeof(line), f)) {
        if (!strncmp(line, ".SH ", 4))
            in_sections = !strncmp(line, ".SH COMMANDS", 12) || !strncmp(line, ".SH OPTIONS", 11);
        if (!strncmp(line, ".TP", 3)) {
            tag = 1;
            continue;
        }
        if (in_sections && tag)
            for (char *p = strstr(line, "\\-\\-"); p; p = strstr(p, "\\-\\-")) {
                char name[80];
                size_t n = 0;
                p += 4;
                while (n + 1 < sizeof(name)) {
                    if ((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9'))
                        name[n++] = *p++;
                    else if (p[0] == '\\' && p[1] == '-' && n > 0)
                        name[n++] = '-', p += 2;
                    else
                        break;
                }
                name[n] = 0;
                if (n && !_has(set, name))
                    _add(set, name, n);
            }
        tag = 0;
    }
    fclose(f);
}

static void test_man_describes_the_table(void **state)
{
    size_t count;
    const dlt_opt *t = dlt_opt_table(&count);
    name_set man, all;
    int bad = 0;
    (void)state;
    _man_names(&man);
    print_message("# man/dltrain.1 items: %s\n", man.s);
    memset(&all, 0, sizeof(all));
    for (size_t i = 0; i < count; i++) {
        if (!_has(&man, t[i].name)) {
            print_message("# man/dltrain.1 has no item for --%s (a .TP tag line under COMMANDS or OPTIONS)\n",
                          t[i].name);
            bad++;
        }
        _add(&all, t[i].name, strlen(t[i].name));
    }
    for (char *p = man.s + 1; *p; p += strcspn(p, "|") + 1) {
        char name[80];
        snprintf(name, sizeof(name), "%.*s", (int)strcspn(p, "|"), p);
        if (!_has(&all, name)) {
            print_message("# man/dltrain.1 describes --%s, which no command takes\n", name);
            bad++;
        }
    }
    assert_int_equal(bad, 0);
}

/* A byte count as --min-bytes/--max-bytes take it: K, M and G in either case (binary multiples),
 * from 8 bytes to 4 GiB, both bounds on both sides. */
static int _bytes(const char *v, size_t *out)
{
    dlt_cli_opts o;
    unsigned char seen[DLT_OPT_MAX];
    int next;
    dlt_err err = DLT_ERR_INIT;
    char *argv[] = {"dltrain", "--min-bytes", (char *)v, NULL};
    memset(&o, 0, sizeof(o));
    memset(seen, 0, sizeof(seen));
    int rc = dlt_opt_parse(DLT_CMD_CHECK, 3, argv, 1, &o, seen, &next, dlt_err_fresh(&err));
    *out = o.check.min_bytes;
    if (rc != 0 && !strstr(err.msg, "expected a byte count from 8 to 4G"))
        fail_msg("--min-bytes %s: '%s'", v, err.msg);
    return rc;
}

static void test_byte_counts(void **state)
{
    static const struct {
        const char *text;
        size_t bytes;
    } good[] = {{"8", 8},
                {"1000", 1000},
                {"1k", 1024},
                {"1K", 1024},
                {"3m", 3u << 20},
                {"3M", 3u << 20},
                {"2g", (size_t)2 << 30},
                {"2G", (size_t)2 << 30},
                {"4G", (size_t)4 << 30},
                {"4096M", (size_t)4 << 30},
                {"4294967296", (size_t)4 << 30}};
    static const char *const bad[] = {"7", "0", "-1", "5G", "4097M", "4294967297", "1T", "1.5M", "M", "", "1KB"};
    size_t v;
    (void)state;
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        if (_bytes(good[i].text, &v) != 0)
            fail_msg("--min-bytes %s refused", good[i].text);
        if (v != good[i].bytes)
            fail_msg("--min-bytes %s: %zu bytes, expected %zu", good[i].text, v, good[i].bytes);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (_bytes(bad[i], &v) == 0)
            fail_msg("--min-bytes '%s' accepted as %zu bytes", bad[i], v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_entries_complete),
        cmocka_unit_test(test_help_lists_the_table),
        cmocka_unit_test(test_man_describes_the_table),
        cmocka_unit_test(test_byte_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

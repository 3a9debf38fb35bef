/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the --dl-train grammar and plugstack.conf site arguments. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "plugin/options.h"

static dlt_site_conf site_default(void)
{
    dlt_site_conf s;
    dlt_site_conf_defaults(&s);
    return s;
}

static void test_plain_flag_uses_site_defaults(void **state)
{
    dlt_site_conf s = site_default();
    dlt_user_opts o;
    dlt_err err = DLT_ERR_INIT;
    char txt[256];
    (void)state;
    assert_int_equal(dlt_user_opts_parse(&o, &s, NULL, dlt_err_fresh(&err)), 0);
    assert_int_equal(o.requested, 1);
    assert_int_equal(o.bind, DLT_BIND_CLOSEST);
    assert_int_equal(o.nccl, DLT_NCCL_AUTO);
    assert_int_equal(dlt_user_opts_format(&o, txt, sizeof(txt)), 0);
    assert_string_equal(txt, "bind=closest,gpus=task,nccl=auto,nic=auto");
    s.default_bind = DLT_BIND_NONE;
    assert_int_equal(dlt_user_opts_parse(&o, &s, "", dlt_err_fresh(&err)), 0);
    {
        /* the length's edge: 1023 bytes of valid tokens are taken, 1024 are refused by length */
        char v[1100];
        size_t n = 0;
        while (n + 8 <= 1023)
            n += (size_t)snprintf(v + n, sizeof(v) - n, "verbose,");
        while (n < 1023)
            v[n++] = ',';
        v[1022] = 'e'; /* ends in a token: "...,verbose,,,e" is refused for its words, not its length */
        v[n] = '\0';
        assert_int_equal(strlen(v), 1023);
        (void)dlt_user_opts_parse(&o, &s, v, dlt_err_fresh(&err));
        assert_null(strstr(err.msg, "longer than"));
        v[n++] = 'x';
        v[n] = '\0';
        assert_int_equal(dlt_user_opts_parse(&o, &s, v, dlt_err_fresh(&err)), -EINVAL);
        assert_non_null(strstr(err.msg, "--dl-train value is 1024 bytes, longer than the 1023 allowed"));
    }
    assert_int_equal(o.bind, DLT_BIND_NONE);
}

static void test_full_list(void **state)
{
    dlt_site_conf s = site_default();
    dlt_user_opts o;
    dlt_err err = DLT_ERR_INIT;
    char txt[256];
    (void)state;
    assert_int_equal(
        dlt_user_opts_parse(&o, &s, "bind=none,nccl=off,nic=mlx5_0,gpus=step,verbose", dlt_err_fresh(&err)), 0);
    assert_int_equal(o.bind, DLT_BIND_NONE);
    assert_int_equal(o.nccl, DLT_NCCL_OFF);
    assert_string_equal(o.nic, "mlx5_0");
    assert_int_equal(o.verbose, 1);
    assert_int_equal(dlt_user_opts_format(&o, txt, sizeof(txt)), 0);
    assert_string_equal(txt, "bind=none,gpus=step,nccl=off,nic=mlx5_0,verbose");
    assert_int_equal(o.gpus, DLT_GPUS_STEP);
    /* Later tokens win, nic=auto resets. */
    assert_int_equal(dlt_user_opts_parse(&o, &s, "nic=eth0,nic=auto,bind=none,bind=closest", dlt_err_fresh(&err)), 0);
    assert_string_equal(o.nic, "");
    assert_int_equal(o.bind, DLT_BIND_CLOSEST);
}

static void expect_bad(const char *opts, const char *needle)
{
    dlt_site_conf s = site_default();
    dlt_user_opts o;
    dlt_err err = DLT_ERR_INIT;
    assert_int_equal(dlt_user_opts_parse(&o, &s, opts, dlt_err_fresh(&err)), -EINVAL);
    if (!strstr(err.msg, needle))
        fail_msg("error for '%s' was '%s', expected to contain '%s'", opts, err.msg, needle);
    assert_true(strlen(err.msg) < DLT_ERR_MAX);
}

static void test_bad_tokens_named(void **state)
{
    (void)state;
    expect_bad("bind=numa", "bind=numa");
    expect_bad("bind=numa", "closest|none");
    expect_bad("nccl=on", "nccl=auto|off");
    expect_bad("gpus=all", "gpus=task|step|none");
    expect_bad("verbos", "unknown option 'verbos'");
    expect_bad("verbos", "bind=closest|none, gpus=task|step|none, nccl=auto|off, nic=auto|NAME, verbose");
    expect_bad("verbose=1", "unknown option 'verbose=1'");
    expect_bad("bind", "unknown option 'bind'");
    expect_bad("nic=eth0;rm", "nic=eth0;rm");
    expect_bad("nic=../../etc", "nic=../../etc");
    expect_bad("nic=", "nic=");
    expect_bad(",verbose", "empty option");
    expect_bad("verbose,", "empty option");
    expect_bad("bind=none,,verbose", "empty option");
}

static void test_oversized_and_hostile(void **state)
{
    char big[4096];
    char nic[200];
    (void)state;
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    expect_bad(big, "longer than");
    strcpy(nic, "nic=");
    memset(nic + 4, 'x', 100);
    nic[104] = '\0';
    expect_bad(nic, "at most 63");
    expect_bad("nic=a\nb", "nic=a");
    expect_bad("bind=closest%n%n%s", "bind=closest%n%n%s"); /* not a format string: printed literally */
}

/* The value may come from the environment unchecked by srun and its message reaches slurmd's log
 * from root: a newline or an escape sequence in any piece of it is shown escaped, never raw. */
static void test_value_escaped_in_messages(void **state)
{
    static const struct {
        const char *opts, *needle;
    } cases[] = {
        {"bind=numa\ndltrain: forged line", "bad value 'bind=numa\\x0adltrain: forged line'"},
        {"nic=eth0\x1b[2J", "nic=eth0\\x1b[2J"},
        {"verbose\nx=1", "unknown option 'verbose\\x0ax=1'"},
        {"fro\rb=\nz", "unknown option 'fro\\x0db=\\x0az'"},
        {"verbose,\n,,bind=none", "--dl-train='verbose,\\x0a,,bind=none': empty option"},
        {"a\\b=c", "unknown option 'a\\\\b=c'"},
    };
    dlt_site_conf s = site_default();
    dlt_user_opts o;
    dlt_err err = DLT_ERR_INIT;
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        expect_bad(cases[i].opts, cases[i].needle);
        assert_int_equal(dlt_user_opts_parse(&o, &s, cases[i].opts, dlt_err_fresh(&err)), -EINVAL);
        for (const char *p = err.msg; *p; p++)
            if ((unsigned char)*p < 0x20 || *p == 0x7f)
                fail_msg("raw byte 0x%02x in '%s'", (unsigned char)*p, err.msg);
    }
    s.allow_bind_none = 0;
    assert_int_equal(dlt_user_opts_parse(&o, &s, "bind=none", dlt_err_fresh(&err)), -EINVAL);
    assert_non_null(strstr(err.msg, "'bind=none' is disabled"));
}

static void test_site_forbids_bind_none(void **state)
{
    dlt_site_conf s = site_default();
    dlt_user_opts o;
    dlt_err err = DLT_ERR_INIT;
    (void)state;
    s.allow_bind_none = 0;
    assert_int_equal(dlt_user_opts_parse(&o, &s, "bind=none", dlt_err_fresh(&err)), -EINVAL);
    assert_non_null(strstr(err.msg, "allow_bind_none=no"));
}

static void test_site_args(void **state)
{
    dlt_site_conf s;
    dlt_err err = DLT_ERR_INIT;
    char *good[] = {"default_bind=none",       "enable=always",
                    "topo_dir=/var/run/dlt",   "nccl_socket_ifname=ib0,eth0",
                    "nccl_ib_hca=mlx5_0:1",    "nvml_lib=/opt/nvidia/libnvidia-ml.so.1",
                    "allow_bind_none=no",      "default_nccl=off",
                    "sysfs_root=/srv/fixture", "default_gpus=step"};
    (void)state;
    assert_int_equal(dlt_site_conf_parse(&s, 10, good, dlt_err_fresh(&err)), 0);
    assert_string_equal(s.sysfs_root, "/srv/fixture");
    assert_int_equal(s.default_gpus, DLT_GPUS_STEP);
    assert_int_equal(s.default_bind, DLT_BIND_NONE);
    assert_int_equal(s.enable, DLT_ENABLE_ALWAYS);
    assert_string_equal(s.topo_dir, "/var/run/dlt");
    assert_string_equal(s.nccl_socket_ifname, "ib0,eth0");
    assert_string_equal(s.nccl_ib_hca, "mlx5_0:1");
    assert_string_equal(s.nvml_lib, "/opt/nvidia/libnvidia-ml.so.1");
    assert_int_equal(s.allow_bind_none, 0);
    assert_int_equal(s.default_nccl, DLT_NCCL_OFF);

    {
        char *a[] = {"default_bind=numa"};
        assert_int_equal(dlt_site_conf_parse(&s, 1, a, dlt_err_fresh(&err)), -EINVAL);
        assert_non_null(strstr(err.msg, "default_bind='numa'"));
    }
    {
        char *a[] = {"topo_dir=relative/dir"};
        assert_int_equal(dlt_site_conf_parse(&s, 1, a, dlt_err_fresh(&err)), -EINVAL);
    }
    {
        char *a[] = {"topo_dir=/run/../tmp"};
        assert_int_equal(dlt_site_conf_parse(&s, 1, a, dlt_err_fresh(&err)), -EINVAL);
    }
    {
        char *a[] = {"topo_dir=/run/.."}; /* a trailing '..' climbs as well */
        assert_int_equal(dlt_site_conf_parse(&s, 1, a, dlt_err_fresh(&err)), -EINVAL);
        char *b[] = {"topo_dir=/run/..x"}; /* a name that only starts with '..' is a name */
        assert_int_equal(dlt_site_conf_parse(&s, 1, b, dlt_err_fresh(&err)), 0);
    }
    {
        char *a[] = {"frobnicate=1"};
        assert_int_equal(dlt_site_conf_parse(&s, 1, a, dlt_err_fresh(&err)), -EINVAL);
        assert_non_null(strstr(err.msg, "unknown argument 'frobnicate'"));
    }
    {
        char *a[] = {"topo_dir=/run/a", "default_bind=none", "topo_dir=/run/b"};
        assert_int_equal(dlt_site_conf_parse(&s, 3, a, dlt_err_fresh(&err)), -EINVAL);
        assert_non_null(strstr(err.msg, "topo_dir given twice ('topo_dir=/run/a' and 'topo_dir=/run/b')"));
    }
    {
        char *a[] = {"topo_dir=/run/a", "topo_dir_x=1"}; /* a key that only starts like another */
        assert_int_equal(dlt_site_conf_parse(&s, 2, a, dlt_err_fresh(&err)), -EINVAL);
        assert_non_null(strstr(err.msg, "unknown argument 'topo_dir_x'"));
    }
    {
        char *a[] = {"noequals"};
        assert_int_equal(dlt_site_conf_parse(&s, 1, a, dlt_err_fresh(&err)), -EINVAL);
        assert_non_null(strstr(err.msg, "not key=value"));
    }
    /* A failed parse leaves defaults, not a half-applied configuration. */
    {
        char *a[] = {"topo_dir=/srv/dlt", "nvml_lib=/x/libnvidia-ml.so.1", "bogus=1"};
        assert_int_equal(dlt_site_conf_parse(&s, 3, a, dlt_err_fresh(&err)), -EINVAL);
    }
    assert_string_equal(s.topo_dir, "/run/dltrain");
    assert_string_equal(s.nvml_lib, "libnvidia-ml.so.1");
}

/* cpu_partitions=: a comma list of partition names, checked like every site key; gpus= given or
 * not is told apart (a node without GPUs decides only for a step that did not say). */
static void test_cpu_partitions_and_gpus_given(void **state)
{
    dlt_site_conf s;
    dlt_user_opts o;
    dlt_err err = DLT_ERR_INIT;
    static const char *const bad[] = {"cpu_partitions=",     "cpu_partitions=cpu,,debug", "cpu_partitions=,cpu",
                                      "cpu_partitions=cpu,", "cpu_partitions=cpu nodes",  "cpu_partitions=cpu\nX",
                                      "cpu_partitions=a/b"};
    char long_list[400];
    (void)state;
    {
        char *a[] = {"cpu_partitions=cpu,debug-2,long.q"};
        assert_int_equal(dlt_site_conf_parse(&s, 1, a, dlt_err_fresh(&err)), 0);
        assert_string_equal(s.cpu_partitions, "cpu,debug-2,long.q");
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *a[] = {(char *)bad[i]};
        assert_int_equal(dlt_site_conf_parse(&s, 1, a, dlt_err_fresh(&err)), -EINVAL);
        assert_non_null(strstr(err.msg, "cpu_partitions="));
        assert_non_null(strstr(err.msg, "comma list of partition names"));
        assert_null(strchr(err.msg, '\n'));
        assert_string_equal(s.cpu_partitions, ""); /* the defaults: none */
    }
    memset(long_list, 'p', sizeof(long_list) - 1);
    memcpy(long_list, "cpu_partitions=", 15);
    long_list[sizeof(long_list) - 1] = '\0';
    {
        char *a[] = {long_list};
        assert_int_equal(dlt_site_conf_parse(&s, 1, a, dlt_err_fresh(&err)), -EINVAL);
    }
    s = site_default();
    assert_int_equal(dlt_user_opts_parse(&o, &s, "verbose", dlt_err_fresh(&err)), 0);
    assert_int_equal(o.gpus_given, 0);
    assert_int_equal(o.gpus, DLT_GPUS_TASK);
    assert_int_equal(dlt_user_opts_parse(&o, &s, "gpus=task", dlt_err_fresh(&err)), 0);
    assert_int_equal(o.gpus_given, 1);
    s.default_gpus = DLT_GPUS_STEP; /* the site's default is not the user asking */
    assert_int_equal(dlt_user_opts_parse(&o, &s, NULL, dlt_err_fresh(&err)), 0);
    assert_int_equal(o.gpus_given, 0);
    assert_int_equal(o.gpus, DLT_GPUS_STEP);
}

static void test_valid_name(void **state)
{
    (void)state;
    assert_true(dlt_valid_name("eth0", 0));
    assert_true(dlt_valid_name("mlx5_0:1", 0));
    assert_false(dlt_valid_name("a,b", 0));
    assert_true(dlt_valid_name("a,b", 1));
    assert_false(dlt_valid_name("", 0));
    assert_false(dlt_valid_name(NULL, 0));
    assert_false(dlt_valid_name("a b", 0));
    assert_false(dlt_valid_name("a/b", 0));
    /* the bound, on both sides: 63 characters fit the 64-byte field with its end, 64 do not */
    {
        char n63[65], n64[66];
        memset(n63, 'x', 63);
        n63[63] = '\0';
        memset(n64, 'x', 64);
        n64[64] = '\0';
        assert_true(dlt_valid_name(n63, 0));
        assert_false(dlt_valid_name(n64, 0));
        assert_false(dlt_valid_name(n64, 1));
    }
}

/* The keys of OPTS as man/spank_dltrain.8 describes them: the first word (up to '=' or a blank)
 * of each tag line (the line after .TP) in its OPTIONS section. */
static void man_keys(char *out, size_t len)
{
    const char *src = getenv("DLT_SRCDIR");
    char path[4096], line[1024];
    int in_options = 0, tag = 0;
    FILE *f;
    snprintf(path, sizeof(path), "%s/man/spank_dltrain.8", src ? src : ".");
    out[0] = '\0';
    f = fopen(path, "r");
    if (!f)
        fail_msg("cannot read %s (DLT_SRCDIR: the source tree)", path);
    while (fgets(line, sizeof(line), f)) {
        if (!strncmp(line, ".SH ", 4))
            in_options = !strncmp(line, ".SH OPTIONS", 11);
        if (!strncmp(line, ".TP", 3)) {
            tag = 1;
            continue;
        }
        if (in_options && tag && line[0] == '.') {
            const char *w = line + strcspn(line, " ") + 1;
            size_t n = strlen(out);
            snprintf(out + n, len - n, "|%.*s", (int)strcspn(w, "= \n"), w);
        }
        tag = 0;
    }
    fclose(f);
    if (out[0]) {
        size_t n = strlen(out);
        snprintf(out + n, len - n, "|");
    }
}

/* Every key is in the option's usage text (srun --help) with its values, in the valid-keys list of
 * a refusal, and in the man page; the man page describes no key the parser does not take. */
static void test_keys_documented(void **state)
{
    size_t count;
    const dlt_user_key *keys = dlt_user_keys(&count);
    dlt_site_conf s = site_default();
    dlt_user_opts o;
    char usage[512], man[1024], want[96];
    dlt_err err = DLT_ERR_INIT;
    int bad = 0;
    (void)state;
    assert_int_equal(dlt_user_opts_usage(usage, sizeof(usage)), 0);
    assert_int_equal(dlt_user_opts_parse(&o, &s, "nosuchkey", dlt_err_fresh(&err)), -EINVAL);
    man_keys(man, sizeof(man));
    print_message("# usage: %s\n# man OPTIONS items: %s\n", usage, man);
    for (size_t i = 0; i < count; i++) {
        snprintf(want, sizeof(want), "%s%s%s", keys[i].key, keys[i].values ? "=" : "",
                 keys[i].values ? keys[i].values : "");
        if (!strstr(usage, want))
            print_message("# the --dl-train usage text lacks %s\n", want), bad++;
        if (!strstr(err.msg, want))
            print_message("# a refusal's valid keys lack %s: %s\n", want, err.msg), bad++;
        snprintf(want, sizeof(want), "|%s|", keys[i].key);
        if (!strstr(man, want))
            print_message("# man/spank_dltrain.8 OPTIONS has no item for %s\n", keys[i].key), bad++;
    }
    for (const char *p = man + 1; *p; p += strcspn(p, "|") + 1) {
        size_t n = strcspn(p, "|"), i;
        for (i = 0; i < count && !(strlen(keys[i].key) == n && !strncmp(keys[i].key, p, n)); i++)
            ;
        if (i == count)
            print_message("# man/spank_dltrain.8 describes %.*s, which --dl-train does not take\n", (int)n, p), bad++;
    }
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_flag_uses_site_defaults),
        cmocka_unit_test(test_full_list),
        cmocka_unit_test(test_bad_tokens_named),
        cmocka_unit_test(test_oversized_and_hostile),
        cmocka_unit_test(test_value_escaped_in_messages),
        cmocka_unit_test(test_site_forbids_bind_none),
        cmocka_unit_test(test_site_args),
        cmocka_unit_test(test_valid_name),
        cmocka_unit_test(test_cpu_partitions_and_gpus_given),
        cmocka_unit_test(test_keys_documented),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of plugstack.conf reading (as Slurm 22.05 reads it), the slurm.conf lookup of
 * PlugStackConfig, and the site settings' text that dltrain-topo --check-plugstack prints. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "plugin/options.h"
#include "plugin/plugstack_conf.h"

static char g_dir[256];

static void _write(const char *rel, const char *text)
{
    char path[512];
    FILE *f;
    snprintf(path, sizeof(path), "%s/%s", g_dir, rel);
    assert_non_null(f = fopen(path, "w"));
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

static dlt_plugstack_scan *_scan_new(int follow)
{
    dlt_plugstack_scan *s = malloc(sizeof(*s));
    assert_non_null(s);
    dlt_plugstack_scan_init(s, DLT_PS_PLUGIN_NAME, follow);
    return s;
}

static int setup_dir(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof(g_dir), "/tmp/dlt-test-plugstack-XXXXXX");
    if (!mkdtemp(g_dir))
        return -1;
    return 0;
}

static int teardown_dir(void **state)
{
    char cmd[300];
    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_split_like_slurm(void **state)
{
    char line[256];
    dlt_ps_words w;
    (void)state;
    snprintf(line, sizeof(line), "required\t/usr/lib/slurm/spank_dltrain.so  a=1 b=2#c=3\n");
    dlt_plugstack_split(line, &w);
    assert_int_equal(w.type, DLT_PS_REQUIRED);
    assert_string_equal(w.path, "/usr/lib/slurm/spank_dltrain.so");
    assert_int_equal(w.argc, 2);
    assert_string_equal(w.argv[0], "a=1");
    assert_string_equal(w.argv[1], "b=2");
    assert_null(w.argv[2]);
    /* '\r' is not one of Slurm's separators: a CRLF file's last word keeps it. */
    snprintf(line, sizeof(line), "optional x.so default_bind=none\r\n");
    dlt_plugstack_split(line, &w);
    assert_int_equal(w.type, DLT_PS_OPTIONAL);
    assert_string_equal(w.argv[0], "default_bind=none\r");
    snprintf(line, sizeof(line), "   # only a comment\n");
    dlt_plugstack_split(line, &w);
    assert_int_equal(w.type, DLT_PS_BLANK);
    /* the type word is case-sensitive, and needs a path after it */
    snprintf(line, sizeof(line), "Required x.so\n");
    dlt_plugstack_split(line, &w);
    assert_int_equal(w.type, DLT_PS_INVALID);
    assert_string_equal(w.word, "Required");
    snprintf(line, sizeof(line), "required # x.so\n");
    dlt_plugstack_split(line, &w);
    assert_int_equal(w.type, DLT_PS_INVALID);
    assert_null(w.path);
}

static void test_split_many_args_counted(void **state)
{
    char line[DLT_PS_LINE_MAX];
    size_t n = (size_t)snprintf(line, sizeof(line), "required spank_dltrain.so");
    dlt_ps_words w;
    (void)state;
    for (int i = 0; i < DLT_PS_ARGS_MAX + 6; i++)
        n += (size_t)snprintf(line + n, sizeof(line) - n, " k%d=v", i);
    dlt_plugstack_split(line, &w);
    assert_int_equal(w.argc, DLT_PS_ARGS_MAX);
    assert_int_equal(w.argc_total, DLT_PS_ARGS_MAX + 6);
    assert_null(w.argv[DLT_PS_ARGS_MAX]);
}

static void test_text_two_lines_and_names(void **state)
{
    static const char text[] = "# plugstack\n"
                               "\n"
                               "required /usr/lib/slurm/pyxis.so\n"
                               "optional /opt/spank_dltrain.so.bak a=1\n"
                               "required /usr/lib/slurm/spank_dltrain.so default_bind=closest # site\n"
                               "  \toptional spank_dltrain.so enable=always topo_dir=/run/d\n"
                               "#required /x/spank_dltrain.so off=1\n"
                               "include plugstack.conf.d/*.conf\n"
                               "frobnicate /x/spank_dltrain.so\n";
    dlt_plugstack_scan *s = _scan_new(0);
    char *const args[] = {"enable=always", "topo_dir=/run/d"};
    (void)state;
    dlt_plugstack_scan_text(s, "/etc/slurm/plugstack.conf", text, sizeof(text) - 1);
    assert_int_equal(s->nfound, 2);
    assert_int_equal(s->nhits, 2);
    assert_string_equal(s->hits[0].file, "/etc/slurm/plugstack.conf");
    assert_int_equal(s->hits[0].line, 5);
    assert_int_equal(s->hits[0].required, 1);
    assert_int_equal(s->hits[0].argc, 1);
    assert_string_equal(s->hits[0].argv[0], "default_bind=closest");
    assert_int_equal(s->hits[1].line, 6);
    assert_int_equal(s->hits[1].required, 0);
    assert_string_equal(s->hits[1].path, "spank_dltrain.so");
    assert_int_equal(dlt_plugstack_find_args(s, 2, args), 1);
    assert_int_equal(dlt_plugstack_find_args(s, 1, args), -1);
    assert_int_equal(s->broken, 0);
    assert_non_null(strstr(s->notes, "/etc/slurm/plugstack.conf:8: include plugstack.conf.d/*.conf not followed"));
    assert_non_null(strstr(s->notes, "/etc/slurm/plugstack.conf:9: 'frobnicate' is not required, optional or include"));
    free(s);
}

static void test_includes_followed(void **state)
{
    char top[512], want[600];
    dlt_plugstack_scan *s = _scan_new(1);
    (void)state;
    assert_int_equal(mkdir(strcat(strcpy(top, g_dir), "/d"), 0755), 0);
    assert_int_equal(mkdir(strcat(strcpy(top, g_dir), "/d/more"), 0755), 0);
    _write("plugstack.conf", "required /lib/other.so\ninclude d/*.conf\ninclude /nonexistent-dir-dlt/*.conf\n");
    /* glob order: a.conf before b.conf; b.conf's include is relative to d/ */
    _write("d/b.conf", "\n\noptional /usr/lib/slurm/spank_dltrain.so default_bind=numa\ninclude more/x.conf\n");
    _write("d/a.conf", "required /usr/lib/slurm/spank_dltrain.so default_gpus=step\n");
    _write("d/a.conf.disabled", "required /usr/lib/slurm/spank_dltrain.so never=1\n");
    _write("d/more/x.conf", "# nested\nrequired spank_dltrain.so nccl_ib_hca=mlx5_0\n");
    snprintf(top, sizeof(top), "%s/plugstack.conf", g_dir);
    assert_int_equal(dlt_plugstack_scan_file(s, top), 0);
    assert_int_equal(s->nfound, 3);
    assert_int_equal(s->nfiles, 4);
    snprintf(want, sizeof(want), "%s/d/a.conf", g_dir);
    assert_string_equal(s->hits[0].file, want);
    assert_int_equal(s->hits[0].line, 1);
    snprintf(want, sizeof(want), "%s/d/b.conf", g_dir);
    assert_string_equal(s->hits[1].file, want);
    assert_int_equal(s->hits[1].line, 3);
    assert_string_equal(s->hits[1].argv[0], "default_bind=numa");
    snprintf(want, sizeof(want), "%s/d/more/x.conf", g_dir);
    assert_string_equal(s->hits[2].file, want);
    assert_int_equal(s->hits[2].line, 2);
    assert_int_equal(s->broken, 0);
    assert_non_null(strstr(s->notes, "include /nonexistent-dir-dlt/*.conf matches no file"));
    free(s);
}

static void test_include_loop_and_missing(void **state)
{
    char top[512];
    dlt_plugstack_scan *s = _scan_new(1);
    (void)state;
    _write("loop.conf", "required /x/spank_dltrain.so a=1\ninclude loop.conf\n");
    snprintf(top, sizeof(top), "%s/loop.conf", g_dir);
    assert_int_equal(dlt_plugstack_scan_file(s, top), 0);
    assert_int_equal(s->broken, 1);
    assert_int_equal(s->nfiles, DLT_PS_DEPTH_MAX); /* the file and its nested includes */
    assert_int_equal(s->nfound, DLT_PS_DEPTH_MAX);
    assert_int_equal(s->nhits, DLT_PS_HITS_MAX < DLT_PS_DEPTH_MAX ? DLT_PS_HITS_MAX : DLT_PS_DEPTH_MAX);
    assert_non_null(strstr(s->notes, "nested deeper than"));
    free(s);
    s = _scan_new(1);
    snprintf(top, sizeof(top), "%s/absent.conf", g_dir);
    assert_int_equal(dlt_plugstack_scan_file(s, top), -ENOENT);
    assert_int_equal(s->broken, 0); /* Slurm: an empty stack */
    assert_non_null(strstr(s->notes, "does not exist"));
    free(s);
    s = _scan_new(1);
    /* a directory is an empty file to Slurm (fgets fails at once); a FIFO is not opened (Slurm would wait) */
    assert_int_equal(dlt_plugstack_scan_file(s, g_dir), 0);
    snprintf(top, sizeof(top), "%s/fifo.conf", g_dir);
    assert_int_equal(mkfifo(top, 0600), 0);
    assert_int_equal(dlt_plugstack_scan_file(s, top), 0);
    assert_int_equal(s->broken, 0);
    assert_non_null(strstr(s->notes, "fifo.conf: not a regular file: not read"));
    free(s);
    s = _scan_new(1);
    /* any other failure to open it: Slurm loads no plugin at all */
    snprintf(top, sizeof(top), "%s/self.conf", g_dir);
    assert_int_equal(symlink(top, top), 0);
    assert_int_equal(dlt_plugstack_scan_file(s, top), -ELOOP);
    assert_int_equal(s->broken, 1);
    assert_non_null(strstr(s->notes, "self.conf: cannot be opened"));
    free(s);
}

/* Slurm's fgets(buf, 4096): a longer line is read as two; the lines after it keep their numbers. */
static void test_long_line(void **state)
{
    size_t n = 0, cap = 3 * DLT_PS_LINE_MAX;
    char *text = malloc(cap);
    dlt_plugstack_scan *s = _scan_new(0);
    (void)state;
    assert_non_null(text);
    n += (size_t)snprintf(text + n, cap - n, "required /a/spank_dltrain.so topo_dir=/");
    while (n < DLT_PS_LINE_MAX + 100)
        text[n++] = 'p';
    n += (size_t)snprintf(text + n, cap - n, " default_bind=none\noptional /b/spank_dltrain.so nvml_lib=x\n");
    dlt_plugstack_scan_text(s, "long.conf", text, n);
    assert_int_equal(s->nfound, 2);
    assert_int_equal(s->hits[0].line, 1);
    assert_int_equal(s->hits[0].argc, 1);
    assert_int_equal(strlen(s->hits[0].argv[0]), DLT_PS_LINE_MAX - 1 - strlen("required /a/spank_dltrain.so "));
    assert_int_equal(s->hits[1].line, 2);
    assert_non_null(strstr(s->notes, "long.conf:1: longer than 4095 bytes"));
    /* the rest of line 1 ("ppp... default_bind=none") is a line of its own to Slurm: ignored */
    assert_non_null(strstr(s->notes, "long.conf:1: 'ppp"));
    free(s);
    free(text);
}

static void test_garbage_bounded(void **state)
{
    char *text = malloc(1 << 16);
    dlt_plugstack_scan *s = _scan_new(0);
    unsigned x = 12345;
    (void)state;
    assert_non_null(text);
    for (int round = 0; round < 20; round++) {
        for (size_t i = 0; i < (1 << 16); i++) {
            static const char alphabet[] = " \t\nrequiredoptionalinclude#spank_dltrain.so/=";
            x = x * 1103515245u + 12345u;
            text[i] = round % 2 ? (char)(x >> 16) : alphabet[(x >> 16) % sizeof(alphabet)];
        }
        dlt_plugstack_scan_init(s, DLT_PS_PLUGIN_NAME, 0);
        dlt_plugstack_scan_text(s, "garbage\n.conf", text, 1 << 16);
        assert_true(s->notes_len < sizeof(s->notes));
        assert_int_equal(strlen(s->notes), s->notes_len);
        assert_true(s->nhits <= DLT_PS_HITS_MAX);
        assert_null(strstr(s->notes, "garbage\n")); /* the file name is escaped */
        for (int i = 0; i < s->nhits; i++)
            assert_int_equal(s->hits[i].argv[s->hits[i].argc] == NULL, 1);
    }
    free(s);
    free(text);
}

static void test_slurm_conf_plugstack(void **state)
{
    char out[64];
    static const char conf[] = "ClusterName=c # PlugStackConfig=/commented\n"
                               "plugstackconfig=/first\n"
                               "SlurmctldHost=h PlugStackConfig=\"/etc/slurm/my plugstack.conf\" SlurmUser=root\n"
                               "NodeName=n1 CPUs=2\n";
    (void)state;
    assert_int_equal(dlt_slurm_conf_plugstack(conf, sizeof(conf) - 1, out, sizeof(out)), 0);
    assert_string_equal(out, "/etc/slurm/my plugstack.conf");
    assert_int_equal(dlt_slurm_conf_plugstack(conf, 66, out, sizeof(out)), 0);
    assert_string_equal(out, "/first");
    assert_int_equal(dlt_slurm_conf_plugstack("# PlugStackConfig=/x\nPlugStackConfigX=/y\n", 41, out, sizeof(out)),
                     -ENOENT);
    assert_int_equal(dlt_slurm_conf_plugstack("PlugStackConfig=/a/very/long/path", 33, out, 8), -ENAMETOOLONG);
}

static void test_default_path_and_where(void **state)
{
    char conf[512], out[512], how[512], where[1024], want[600];
    dlt_err err = DLT_ERR_INIT;
    char *const args[] = {"default_bind=numa"};
    char *const other[] = {"default_bind=none"};
    (void)state;
    _write("slurm.conf", "ClusterName=x\n");
    snprintf(conf, sizeof(conf), "%s/slurm.conf", g_dir);
    assert_int_equal(dlt_plugstack_default_path(conf, "/nowhere", out, sizeof(out), how, sizeof(how), &err), 0);
    snprintf(want, sizeof(want), "%s/plugstack.conf", g_dir);
    assert_string_equal(out, want);
    assert_non_null(strstr(how, "sets no PlugStackConfig"));
    assert_int_equal(dlt_plugstack_default_path(NULL, g_dir, out, sizeof(out), NULL, 0, &err), 0);
    assert_string_equal(out, want);
    _write("slurm.conf", "ClusterName=x\nPlugStackConfig=/elsewhere/ps.conf\n");
    assert_int_equal(dlt_plugstack_default_path(conf, "/nowhere", out, sizeof(out), how, sizeof(how), &err), 0);
    assert_string_equal(out, "/elsewhere/ps.conf");
    assert_non_null(strstr(how, "PlugStackConfig in"));

    _write("slurm.conf", "ClusterName=x\n");
    _write("plugstack.conf", "\n\nrequired /lib/spank_dltrain.so default_bind=none\n"
                             "required /lib/spank_dltrain.so default_bind=numa\n");
    assert_int_equal(dlt_plugstack_where(1, args, conf, "/nowhere", where, sizeof(where)), 0);
    snprintf(want, sizeof(want), "%s/plugstack.conf:4", g_dir);
    assert_string_equal(where, want);
    assert_int_equal(dlt_plugstack_where(1, other, conf, "/nowhere", where, sizeof(where)), 0);
    snprintf(want, sizeof(want), "%s/plugstack.conf:3", g_dir);
    assert_string_equal(where, want);
    assert_int_equal(dlt_plugstack_where(0, NULL, conf, "/nowhere", where, sizeof(where)), -ENOENT);
    assert_non_null(strstr(where, "no line with these arguments"));
}

/* Every site key (as the parser's own refusal lists them) is in the text, and the text (less the
 * unset names) parses back to the same settings. */
static void test_site_conf_format(void **state)
{
    dlt_site_conf site, again;
    dlt_err err = DLT_ERR_INIT;
    char *const bad[] = {"nosuchkey=1"};
    char *const set[] = {"default_bind=none", "default_gpus=step", "enable=always", "topo_dir=/run/x",
                         "nccl_ib_hca=mlx5_0,mlx5_1"};
    char text[1024], keys[512], *argv[32], *save = NULL, *p;
    int argc = 0;
    (void)state;
    assert_int_not_equal(dlt_site_conf_parse(&site, 1, bad, &err), 0);
    assert_non_null(p = strstr(err.msg, "(keys: "));
    snprintf(keys, sizeof(keys), "%s", p + 7);
    assert_non_null(p = strchr(keys, ')'));
    *p = '\0';
    assert_int_equal(dlt_site_conf_parse(&site, 5, set, dlt_err_fresh(&err)), 0);
    assert_int_equal(dlt_site_conf_format(&site, text, sizeof(text)), 0);
    for (char *k = strtok_r(keys, ", ", &save); k; k = strtok_r(NULL, ", ", &save)) {
        char want[64];
        snprintf(want, sizeof(want), "%s=", k);
        assert_non_null(strstr(text, want));
    }
    save = NULL;
    for (char *w = strtok_r(text, " ", &save); w && argc < 32; w = strtok_r(NULL, " ", &save))
        if (!strstr(w, "=(unset)"))
            argv[argc++] = w;
    assert_int_equal(dlt_site_conf_parse(&again, argc, argv, dlt_err_fresh(&err)), 0);
    assert_memory_equal(&again, &site, sizeof(site));
    assert_int_equal(dlt_site_conf_format(&site, text, 40), -ENOSPC);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_like_slurm),         cmocka_unit_test(test_split_many_args_counted),
        cmocka_unit_test(test_text_two_lines_and_names), cmocka_unit_test(test_includes_followed),
        cmocka_unit_test(test_include_loop_and_missing), cmocka_unit_test(test_long_line),
        cmocka_unit_test(test_garbage_bounded),          cmocka_unit_test(test_slurm_conf_plugstack),
        cmocka_unit_test(test_default_path_and_where),   cmocka_unit_test(test_site_conf_format),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}

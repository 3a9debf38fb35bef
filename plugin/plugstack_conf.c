/* SPDX-License-Identifier: Apache-2.0 */
/* plugstack_conf: plugstack.conf read the way Slurm 22.05 reads it, to find the lines that load one
 * plugin, following include globs with bounded depth and file count; and where that file is.
 *
 * What Slurm does, from its 22.05 sources (tag slurm-22-05-8-1; the SPANK stack lives in
 * src/common/plugstack.c, there is no spank.c):
 *  - spank_stack_init (plugstack.c:769): the file is slurm_conf.plugstack (PlugStackConfig=), else
 *    get_extra_conf_path("plugstack.conf") (read_config.c:6121): plugstack.conf in the directory of
 *    SLURM_CONF, or of Slurm's compiled-in slurm.conf.
 *  - _spank_stack_load (plugstack.c:553): a missing file is an empty one; any other failure to open
 *    it fails the whole stack; a read error (a directory) ends the file quietly. Each line is read with fgets into char
 * buf[4096], so a longer line is read as several, and Slurm's own line counter counts those pieces.
 *  - _plugin_stack_parse_line (plugstack.c:299): everything from the first '#' on is dropped; words
 *    are split at " \t\n" only (a '\r' stays in the word); no word: an empty line. The first word
 *    must be exactly required, optional or include (_plugin_stack_line_type, plugstack.c:282), the
 *    second is the path, the rest are the plugin's arguments.
 *  - _spank_stack_process_line (plugstack.c:483): a bad first word or a missing path is logged
 *    ("Invalid line. Ignoring.") and the line skipped; a relative path is looked up in PluginDir; a
 *    required plugin that fails to load fails the stack.
 *  - _spank_conf_include (plugstack.c:587): a relative pattern is taken from the including file's
 *    directory; glob(3) with no flags (sorted); no match is no error; each match is loaded as above,
 *    with no bound on nesting. */
#include "plugstack_conf.h"
#include "text_escape.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

static void _note(dlt_plugstack_scan *s, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void _note(dlt_plugstack_scan *s, const char *file, int line, const char *fmt, ...)
{
    char shown[256], words[768], one[1100];
    size_t room = sizeof(s->notes) - s->notes_len;
    va_list ap;
    int n;
    if (s->notes_cut)
        return;
    va_start(ap, fmt);
    vsnprintf(words, sizeof(words), fmt, ap);
    va_end(ap);
    dlt_name_escape(file, shown, sizeof(shown));
    n = line > 0 ? snprintf(one, sizeof(one), "%s:%d: %s\n", shown, line, words)
                 : snprintf(one, sizeof(one), "%s: %s\n", shown, words);
    if (n < 0)
        return;
    if ((size_t)n + 5 > room) { /* room for "...\n" is always kept */
        memcpy(s->notes + s->notes_len, "...\n", 5);
        s->notes_len += 4;
        s->notes_cut = 1;
        return;
    }
    memcpy(s->notes + s->notes_len, one, (size_t)n + 1);
    s->notes_len += (size_t)n;
}

void dlt_plugstack_split(char *line, dlt_ps_words *w)
{
    static const char sep[] = " \t\n";
    char *save = NULL, *hash, *word;
    memset(w, 0, sizeof(*w));
    if ((hash = strchr(line, '#')))
        *hash = '\0';
    if (!(word = strtok_r(line, sep, &save))) {
        w->type = DLT_PS_BLANK;
        return;
    }
    w->word = word;
    if (!strcmp(word, "required"))
        w->type = DLT_PS_REQUIRED;
    else if (!strcmp(word, "optional"))
        w->type = DLT_PS_OPTIONAL;
    else if (!strcmp(word, "include"))
        w->type = DLT_PS_INCLUDE;
    else {
        w->type = DLT_PS_INVALID;
        return;
    }
    if (!(w->path = strtok_r(NULL, sep, &save))) {
        w->type = DLT_PS_INVALID;
        return;
    }
    while ((word = strtok_r(NULL, sep, &save))) {
        if (w->argc < DLT_PS_ARGS_MAX)
            w->argv[w->argc++] = word;
        w->argc_total++;
    }
    w->argv[w->argc] = NULL;
}

void dlt_plugstack_scan_init(dlt_plugstack_scan *s, const char *plugin, int follow_includes)
{
    memset(s, 0, sizeof(*s));
    s->plugin = plugin;
    s->follow_includes = follow_includes;
}

static const char *_base(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static void _hit(dlt_plugstack_scan *s, const char *file, int line, const dlt_ps_words *w)
{
    dlt_plugstack_hit *h;
    size_t used = 0;
    if (s->nfound++ >= DLT_PS_HITS_MAX)
        return;
    h = &s->hits[s->nhits++];
    memset(h, 0, sizeof(*h));
    snprintf(h->file, sizeof(h->file), "%s", file);
    snprintf(h->path, sizeof(h->path), "%s", w->path);
    h->line = line;
    h->required = w->type == DLT_PS_REQUIRED;
    h->argc_total = w->argc_total;
    /* The arguments came from one line of under DLT_PS_LINE_MAX bytes: they fit. */
    for (int i = 0; i < w->argc; i++) {
        size_t n = strlen(w->argv[i]) + 1;
        if (used + n > sizeof(h->args))
            break;
        memcpy(h->args + used, w->argv[i], n);
        h->argv[h->argc++] = h->args + used;
        used += n;
    }
    h->argv[h->argc] = NULL;
}

static int _scan_file_at(dlt_plugstack_scan *s, const char *file, int depth);

static void _include(dlt_plugstack_scan *s, const char *file, int line, const char *pattern, int depth)
{
    char full[DLT_PS_PATH_MAX * 2], shown[256];
    glob_t gl;
    int rc;
    dlt_name_escape(pattern, shown, sizeof(shown));
    if (!s->follow_includes) {
        _note(s, file, line, "include %s not followed", shown);
        return;
    }
    if (depth + 1 >= DLT_PS_DEPTH_MAX) {
        s->broken = 1;
        _note(s, file, line,
              "include %s: includes nested deeper than %d (an include loop?): not followed; Slurm follows them "
              "without bound",
              shown, DLT_PS_DEPTH_MAX);
        return;
    }
    if (pattern[0] != '/') {
        const char *slash = strrchr(file, '/');
        int n = slash ? snprintf(full, sizeof(full), "%.*s/%s", (int)(slash - file), file, pattern)
                      : snprintf(full, sizeof(full), "./%s", pattern);
        if (n < 0 || (size_t)n >= sizeof(full)) {
            s->broken = 1;
            _note(s, file, line, "include %s: the path is too long to follow", shown);
            return;
        }
        pattern = full;
    }
    memset(&gl, 0, sizeof(gl));
    rc = glob(pattern, 0, NULL, &gl);
    if (rc == GLOB_NOMATCH) {
        dlt_name_escape(pattern, shown, sizeof(shown));
        _note(s, file, line, "include %s matches no file", shown);
    } else if (rc != 0) {
        dlt_name_escape(pattern, shown, sizeof(shown));
        _note(s, file, line, "include %s: cannot list it (glob error %d)", shown, rc);
    } else {
        for (size_t i = 0; i < gl.gl_pathc; i++) {
            int r = _scan_file_at(s, gl.gl_pathv[i], depth + 1);
            if (r < 0 && r != -ENOENT)
                break; /* Slurm stops at the first file it cannot read */
        }
    }
    globfree(&gl);
}

/* One piece of a line as Slurm's fgets hands it over. */
static void _piece(dlt_plugstack_scan *s, const char *file, int line, char *buf, int depth)
{
    dlt_ps_words w;
    char shown[128];
    dlt_plugstack_split(buf, &w);
    switch (w.type) {
    case DLT_PS_BLANK: return;
    case DLT_PS_INVALID:
        dlt_name_escape(w.word, shown, sizeof(shown));
        if (!strcmp(w.word, "required") || !strcmp(w.word, "optional") || !strcmp(w.word, "include"))
            _note(s, file, line, "'%s' without a path: Slurm ignores this line", shown);
        else
            _note(s, file, line, "'%s' is not required, optional or include: Slurm ignores this line", shown);
        return;
    case DLT_PS_INCLUDE: _include(s, file, line, w.path, depth); return;
    default:
        if (!strcmp(_base(w.path), s->plugin))
            _hit(s, file, line, &w);
        return;
    }
}

/* A source of bytes: a FILE or a text in memory. */
typedef struct {
    FILE *f;
    const char *text;
    size_t len, pos;
} _src;

static int _getc(_src *in)
{
    if (in->f)
        return getc(in->f);
    return in->pos < in->len ? (unsigned char)in->text[in->pos++] : EOF;
}

/* fgets(buf, DLT_PS_LINE_MAX, ...) as Slurm calls it, also saying whether the piece ended the line.
 * Returns the bytes read (0 at the end). */
static size_t _fgets(_src *in, char *buf, int *ended)
{
    size_t n = 0;
    int c = 0;
    *ended = 0;
    while (n < DLT_PS_LINE_MAX - 1 && (c = _getc(in)) != EOF) {
        buf[n++] = (char)c;
        if (c == '\n') {
            *ended = 1;
            break;
        }
    }
    buf[n] = '\0';
    return n;
}

static void _scan_src(dlt_plugstack_scan *s, const char *file, _src *in, int depth)
{
    char buf[DLT_PS_LINE_MAX];
    int line = 1, ended, continued = 0;
    size_t n;
    while ((n = _fgets(in, buf, &ended)) > 0) {
        if (!ended && !continued && n == DLT_PS_LINE_MAX - 1)
            _note(s, file, line, "longer than %d bytes: Slurm reads the rest of the line as another line",
                  DLT_PS_LINE_MAX - 1);
        _piece(s, file, line, buf, depth);
        continued = !ended;
        if (ended)
            line++;
    }
}

void dlt_plugstack_scan_text(dlt_plugstack_scan *s, const char *file, const char *text, size_t len)
{
    _src in = {NULL, text, len, 0};
    s->nfiles++;
    _scan_src(s, file, &in, 0);
}

/* The file opened for reading when it is a regular file: 0 with *f set; 1 when it is something else
 * (a directory reads as empty to Slurm; a FIFO would block it, and is not opened here); or -errno.
 * O_NONBLOCK keeps open(2) from waiting on a FIFO. */
static int _open_regular(const char *path, FILE **f)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK), e;
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) != 0) {
        e = errno;
        close(fd);
        return -e;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return 1;
    }
    if (!(*f = fdopen(fd, "r"))) {
        e = errno;
        close(fd);
        return -e;
    }
    return 0;
}

static int _scan_file_at(dlt_plugstack_scan *s, const char *file, int depth)
{
    _src in = {NULL, NULL, 0, 0};
    int rc;
    if (s->nfiles >= DLT_PS_FILES_MAX) {
        s->broken = 1;
        _note(s, file, 0, "not read: more than %d files included", DLT_PS_FILES_MAX);
        return -E2BIG;
    }
    rc = _open_regular(file, &in.f);
    if (rc == -ENOENT) {
        _note(s, file, 0, "does not exist (Slurm reads a missing plugstack file as an empty one)");
        return rc;
    }
    if (rc == 1) {
        _note(s, file, 0, "not a regular file: not read (Slurm reads a directory as empty and waits on a FIFO)");
        return 0;
    }
    if (rc < 0) { /* _spank_stack_load: any other open failure fails the stack */
        s->broken = 1;
        _note(s, file, 0, "cannot be opened: %s; Slurm then loads no plugin at all and every step fails",
              strerror(-rc));
        return rc;
    }
    s->nfiles++;
    _scan_src(s, file, &in, depth);
    if (ferror(in.f)) /* fgets stops there and Slurm goes on with what it read */
        _note(s, file, 0, "read error: Slurm uses the lines before it");
    fclose(in.f);
    return 0;
}

int dlt_plugstack_scan_file(dlt_plugstack_scan *s, const char *file)
{
    return _scan_file_at(s, file, 0);
}

int dlt_plugstack_find_args(const dlt_plugstack_scan *s, int argc, char *const argv[])
{
    for (int i = 0; i < s->nhits; i++) {
        const dlt_plugstack_hit *h = &s->hits[i];
        int same = h->argc_total == argc && h->argc == argc;
        for (int k = 0; same && k < argc; k++)
            same = argv[k] && !strcmp(h->argv[k], argv[k]);
        if (same)
            return i;
    }
    return -1;
}

/* One slurm.conf line's PlugStackConfig=VALUE (any case, among other KEY=VALUE pairs; a value in
 * double quotes may hold spaces); 1 when found. */
static int _conf_line(const char *p, const char *end, const char **val, size_t *vlen)
{
    static const char key[] = "PlugStackConfig";
    int found = 0;
    while (p < end) {
        const char *k, *v;
        size_t klen;
        while (p < end && (*p == ' ' || *p == '\t' || *p == '\r'))
            p++;
        if (p >= end || *p == '#')
            break;
        k = p;
        while (p < end && *p != '=' && *p != ' ' && *p != '\t' && *p != '#')
            p++;
        if (p >= end || *p != '=')
            continue; /* a word without a value (Include FILE and the like) */
        klen = (size_t)(p - k);
        v = ++p;
        if (p < end && *p == '"') {
            v = ++p;
            while (p < end && *p != '"')
                p++;
        } else {
            while (p < end && *p != ' ' && *p != '\t' && *p != '\r' && *p != '#')
                p++;
        }
        if (klen == sizeof(key) - 1 && !strncasecmp(k, key, klen)) {
            *val = v;
            *vlen = (size_t)(p - v);
            found = 1;
        }
        if (p < end && *p == '"')
            p++;
    }
    return found;
}

int dlt_slurm_conf_plugstack(const char *text, size_t len, char *out, size_t outlen)
{
    const char *p = text, *end = text + len, *val = NULL;
    size_t vlen = 0;
    int found = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *eol = nl ? nl : end;
        const char *v;
        size_t n;
        if (_conf_line(p, eol, &v, &n)) {
            val = v, vlen = n;
            found = 1;
        }
        p = nl ? nl + 1 : end;
    }
    if (!found || vlen == 0)
        return -ENOENT;
    if (vlen >= outlen || memchr(val, '\0', vlen))
        return -ENAMETOOLONG;
    memcpy(out, val, vlen);
    out[vlen] = '\0';
    return 0;
}

/* slurm.conf's text, at most 16 MiB of it. */
static int _read_all(const char *path, char **text, size_t *len)
{
    FILE *f = NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf;
    int rc = _open_regular(path, &f);
    if (rc != 0)
        return rc > 0 ? -EINVAL : rc;
    if (!(buf = malloc(cap))) {
        fclose(f);
        return -ENOMEM;
    }
    for (;;) {
        size_t got;
        if (n == cap) {
            char *more = cap < (16u << 20) ? realloc(buf, cap * 2) : NULL;
            if (!more)
                break; /* the first 16 MiB: the setting is near the top in any real file */
            buf = more, cap *= 2;
        }
        got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    if (ferror(f)) {
        fclose(f);
        free(buf);
        return -EIO;
    }
    fclose(f);
    *text = buf, *len = n;
    return 0;
}

int dlt_plugstack_default_path(const char *slurm_conf, const char *sysconfdir, char *out, size_t outlen, char *how,
                               size_t howlen, dlt_err *err)
{
    char conf[DLT_PS_PATH_MAX], shown[256];
    char *text = NULL;
    size_t len = 0;
    const char *slash;
    int rc, n;
    if (slurm_conf && *slurm_conf)
        n = snprintf(conf, sizeof(conf), "%s", slurm_conf);
    else
        n = snprintf(conf, sizeof(conf), "%s/slurm.conf", sysconfdir);
    if (n < 0 || (size_t)n >= sizeof(conf))
        return dlt_fail(err, -ENAMETOOLONG, "the slurm.conf path is longer than %zu bytes", sizeof(conf) - 1);
    dlt_name_escape(conf, shown, sizeof(shown));
    rc = _read_all(conf, &text, &len);
    if (rc == 0) {
        rc = dlt_slurm_conf_plugstack(text, len, out, outlen);
        free(text);
        if (rc == 0) {
            if (how)
                snprintf(how, howlen, "PlugStackConfig in %s", shown);
            return 0;
        }
        if (rc != -ENOENT)
            return dlt_fail(err, rc, "PlugStackConfig in %s is longer than %zu bytes", shown, outlen - 1);
        if (how)
            snprintf(how, howlen, "beside %s, which sets no PlugStackConfig", shown);
    } else if (how) {
        snprintf(how, howlen, "beside %s (%s)", shown, strerror(-rc));
    }
    /* get_extra_conf_path: the directory of slurm.conf, even when it cannot be read. */
    slash = strrchr(conf, '/');
    n = slash ? snprintf(out, outlen, "%.*s/plugstack.conf", (int)(slash - conf), conf)
              : snprintf(out, outlen, "plugstack.conf");
    if (n < 0 || (size_t)n >= outlen)
        return dlt_fail(err, -ENAMETOOLONG, "the plugstack.conf path beside %s is longer than %zu bytes", shown,
                        outlen - 1);
    return 0;
}

int dlt_plugstack_where(int argc, char *const argv[], const char *slurm_conf, const char *sysconfdir, char *out,
                        size_t outlen)
{
    char file[DLT_PS_PATH_MAX], shown[256], how[512];
    dlt_plugstack_scan *s;
    dlt_err err = DLT_ERR_INIT;
    int i;
    if (dlt_plugstack_default_path(slurm_conf, sysconfdir, file, sizeof(file), how, sizeof(how), &err) != 0) {
        snprintf(out, outlen, "%s", err.msg);
        return -ENOENT;
    }
    dlt_name_escape(file, shown, sizeof(shown));
    if (!(s = malloc(sizeof(*s)))) {
        snprintf(out, outlen, "out of memory for the plugstack scan");
        return -ENOENT;
    }
    dlt_plugstack_scan_init(s, DLT_PS_PLUGIN_NAME, 1);
    (void)dlt_plugstack_scan_file(s, file);
    i = dlt_plugstack_find_args(s, argc, argv);
    if (i >= 0) {
        char where[256];
        dlt_name_escape(s->hits[i].file, where, sizeof(where));
        snprintf(out, outlen, "%s:%d", where, s->hits[i].line);
    } else {
        snprintf(out, outlen, "no line with these arguments in %s (%s) or the files it includes", shown, how);
    }
    free(s);
    return i >= 0 ? 0 : -ENOENT;
}

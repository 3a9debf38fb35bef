/* SPDX-License-Identifier: Apache-2.0 */
/* stepd_side: the remote (slurmstepd) context: once per step (as root) and once per task (in the
 * forked task, as the user, before exec). */
#include "config.h"

#include "stepd_side.h"

#include <dlfcn.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <slurm/slurm.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "binding.h"
#include "common/env_contract.h"
#include "common/hostlist.h"
#include "common/node_name.h"
#include "common/topo_file.h"
#include "nccl_topo_xml.h"
#include "nvml_loader.h"
#include "rank_env.h"
#include "step_dir.h"
#include "topo_report.h"

#define TOPO_FILE_NAME "nccl_topo.xml"
#define XML_MAX (256 * 1024)
/* SLURM_STEP_NODELIST at its longest read (1 MiB: a list of tens of thousands of scattered nodes) */
#define NODELIST_MAX (1 << 20)
/* DLT_CPUS at its longest: every other CPU of 1024 listed one by one ("0,2,4,...") */
#define DLT_CPUS_TEXT_MAX 4096

static int _step_fail(dlt_plugin_state *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int _step_fail(dlt_plugin_state *st, const char *fmt, ...)
{
    char words[DLT_ERR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(words, sizeof(words), fmt, ap);
    va_end(ap);
    dlt_fail(&st->err, -EIO, "%s", words); /* the step's first failure is what its tasks say */
    st->step_error = 1;
    slurm_error("dltrain: %s", words);
    return -1;
}

/* The step has GPUs on this node when Slurm's gres put any into its environment. */
static int _step_has_gpus(spank_t sp)
{
    char buf[256];
    static const char *vars[] = {"SLURM_STEP_GPUS", "SLURM_JOB_GPUS", DLT_ENV_CUDA_VISIBLE_DEVICES};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
        if (spank_getenv(sp, vars[i], buf, sizeof(buf)) == ESPANK_SUCCESS && buf[0] && strcmp(buf, "NoDevFiles"))
            return 1;
    return 0;
}

/* "JOB.STEP", or -1 when Slurm cannot say either (a made-up "0.0" would take another step's name). */
static int _step_name(spank_t sp, char *name, size_t len)
{
    uint32_t job = 0, step = 0;
    if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS)
        return -1;
    snprintf(name, len, "%u.%u", job, step);
    return 0;
}

/* node's address as slurmstepd's own configuration has it (NodeAddr of slurm.conf, "as Slurm
 * resolves it"): Slurm's slurm_conf_get_address, found in the slurmstepd process this runs in
 * (dlsym: the plugin links nothing of Slurm's). 0 and out filled, or -ENOENT. */
static int _slurm_node_addr(const char *node, char *out, size_t outlen)
{
    static const char *const getters[] = {"slurm_conf_get_address", "slurm_conf_get_nodeaddr"};
    void (*xfree)(void **) = (void (*)(void **))dlsym(RTLD_DEFAULT, "slurm_xfree");
    for (size_t i = 0; i < sizeof(getters) / sizeof(getters[0]); i++) {
        char *(*get)(const char *) = (char *(*)(const char *))dlsym(RTLD_DEFAULT, getters[i]);
        char *a = get ? get(node) : NULL;
        if (a && *a) {
            snprintf(out, outlen, "%s", a);
            if (xfree)
                xfree((void **)&a);
            return 0;
        }
        if (a && xfree)
            xfree((void **)&a);
    }
    return -ENOENT;
}

/* The first host of the step's node list. Slurm gives the list only as SLURM_STEP_NODELIST (no
 * spank item names the step's nodes), so the host is read with Slurm's own hostlist functions,
 * found in the slurmstepd process this runs in (slurm.h's slurm_hostlist_*, exported by the
 * libslurmfull slurmstepd links; dlsym, as for the NodeAddr above: linking libslurm.so into
 * slurmstepd would load a second copy of Slurm's internals). Without them (another loader, a
 * stripped build) the project's parser of the same grammar, for the release this plugin was built
 * against (SPANK plugins are built per release), reads it. 0, or -EINVAL / -ENOSPC. */
static int _first_node(const char *list, char *out, size_t outlen)
{
    void *(*create)(const char *) = (void *(*)(const char *))dlsym(RTLD_DEFAULT, "slurm_hostlist_create");
    char *(*shift)(void *) = (char *(*)(void *))dlsym(RTLD_DEFAULT, "slurm_hostlist_shift");
    void (*destroy)(void *) = (void (*)(void *))dlsym(RTLD_DEFAULT, "slurm_hostlist_destroy");
    void *hl;
    char *host;
    int rc;
    if (!create || !shift || !destroy)
        return dlt_hostlist_first(list, SLURM_VERSION_NUMBER, out, outlen);
    hl = create(list);
    if (!hl)
        return -EINVAL;
    host = shift(hl); /* malloc'd, the caller frees it (slurm.h) */
    destroy(hl);
    if (!host || !*host)
        rc = -EINVAL;
    else
        rc = snprintf(out, outlen, "%s", host) < (int)outlen ? 0 : -ENOSPC;
    free(host);
    return rc;
}

/* The rank contract's step-wide part: rank 0's node and an address every task can reach for it,
 * and the port. MASTER_ADDR is the node's name when this node resolves it, else the NodeAddr Slurm
 * gives it (test clusters and sites whose node names are not in DNS); neither, and it is left
 * unset, saying why. Rank 0 runs on the step's first node under every distribution but
 * arbitrary (block, cyclic, plane all place task 0 there). */
static void _rank_contract_step(spank_t sp, dlt_plugin_state *st)
{
    char list[4096] = "", resv[256] = "", shown[72], *big = NULL;
    const char *text = list;
    spank_err_t r;
    uint32_t job = 0, step = 0;
    struct addrinfo hints, *res = NULL;
    st->master_node[0] = st->master_addr[0] = st->master_why[0] = '\0';
    st->master_port = st->port_reserved = 0;
    (void)spank_get_item(sp, S_JOB_ID, &job);
    (void)spank_get_item(sp, S_JOB_STEPID, &step);
    if (spank_getenv(sp, "SLURM_STEP_RESV_PORTS", resv, sizeof(resv)) != ESPANK_SUCCESS)
        resv[0] = '\0';
    if (dlt_rank_port(resv, job, step, &st->master_port, &st->port_reserved) != 0) {
        dlt_name_escape(resv, shown, sizeof(shown));
        snprintf(st->master_why, sizeof(st->master_why), "SLURM_STEP_RESV_PORTS='%s' names no port", shown);
        st->master_port = 0;
    }
    /* A list of thousands of nodes outgrows the stack buffer: once more on the heap, bounded. */
    r = spank_getenv(sp, "SLURM_STEP_NODELIST", list, sizeof(list));
    if (r == ESPANK_NOSPACE && (big = malloc(NODELIST_MAX)) != NULL &&
        (r = spank_getenv(sp, "SLURM_STEP_NODELIST", big, NODELIST_MAX)) == ESPANK_SUCCESS)
        text = big;
    if (r != ESPANK_SUCCESS || _first_node(text, st->master_node, sizeof(st->master_node)) != 0 ||
        !dlt_valid_name(st->master_node, 0)) {
        dlt_name_escape(r == ESPANK_SUCCESS ? text : "", shown, sizeof(shown));
        if (r == ESPANK_NOSPACE)
            snprintf(st->master_why, sizeof(st->master_why), "SLURM_STEP_NODELIST is longer than %d bytes",
                     NODELIST_MAX - 1);
        else
            snprintf(st->master_why, sizeof(st->master_why), "SLURM_STEP_NODELIST='%s' gives no first node%s", shown,
                     st->master_node[0] ? " that is a host name" : "");
        st->master_node[0] = '\0';
        free(big);
        return;
    }
    free(big);
    /* Slurm's own address for the node first (NodeAddr, a name or an address as slurm.conf gives
     * it): read from slurmstepd's configuration, it costs no name lookup. A lookup on every node of
     * every step is a burst of DNS queries as wide as the step (64 at once on one resolver lost
     * some and held nodes back by its 4-5 s retry); where NodeAddr is not set it is the node's
     * name, as before. */
    if (_slurm_node_addr(st->master_node, st->master_addr, sizeof(st->master_addr)) == 0 &&
        dlt_valid_name(st->master_addr, 0))
        return;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(st->master_node, NULL, &hints, &res) == 0) {
        freeaddrinfo(res);
        snprintf(st->master_addr, sizeof(st->master_addr), "%s", st->master_node);
        return;
    }
    snprintf(st->master_why, sizeof(st->master_why),
             "rank 0's node %s resolves neither by name nor through "
             "Slurm's NodeAddr",
             st->master_node);
    st->master_addr[0] = '\0';
}

int dlt_stepd_step_setup(spank_t sp, dlt_plugin_state *st)
{
    dlt_nvml nvml;
    dlt_err err = DLT_ERR_INIT;
    char name[64], node[64] = "?", note[DLT_ERR_MAX], partition[128];
    static char xml[XML_MAX];
    int rc, has_gpus, stale = 0;
    dlt_gpus_mode gpus;
    gid_t gid = 0;

    st->step_error = 0;
    st->have_topology = 0;
    st->step_dir[0] = st->topo_file[0] = st->gpus_why[0] = '\0';
    memset(&st->topo, 0, sizeof(st->topo));
    has_gpus = _step_has_gpus(sp);
    dlt_node_name(node, sizeof(node));
    _rank_contract_step(sp, st);

    rc = dlt_nvml_open(&nvml, st->site.nvml_lib, &err);
    st->have_nvml = rc == 0;
    if (rc == 0) {
        rc = dlt_topo_add_nvml_gpus(&st->topo, &nvml, &err);
        dlt_nvml_close(&nvml);
        if (rc != 0)
            return _step_fail(st, "node %s: GPU discovery failed: %s", node, err.msg);
    } else if (has_gpus) {
        return _step_fail(st,
                          "node %s: this step has GPUs but the GPU driver's NVML cannot be used (%s); is the NVIDIA "
                          "driver installed, or is nvml_lib= in plugstack.conf wrong?",
                          node, err.msg);
    } else {
        dlt_err_clear(&err); /* no driver and no GPU asked for: not a failure */
    }
    /* A step without GPUs on a node without any is a CPU step; on a GPU node it is refused. */
    if (spank_getenv(sp, "SLURM_JOB_PARTITION", partition, sizeof(partition)) != ESPANK_SUCCESS)
        partition[0] = '\0';
    if (dlt_gpus_decide(&st->opts, &st->site, partition, has_gpus, st->have_nvml, st->topo.ngpus, &gpus, st->gpus_why,
                        sizeof(st->gpus_why)) == 0)
        st->opts.gpus = gpus;
    else if (st->explicit_request)
        return _step_fail(st, "node %s: %s", node, st->gpus_why);
    else
        st->gpus_why[0] = '\0'; /* enable=always: a step that never asked for --dl-train is not refused */
    /* No driver and no GPUs: nothing to bind to a GPU, NICs are still worth choosing. */
    rc = dlt_topo_load_sysfs(&st->topo, st->site.sysfs_root, &err);
    if (rc != 0)
        return _step_fail(st, "node %s: reading %s failed: %s", node, st->site.sysfs_root, err.msg);
    st->have_topology = 1;

    if (st->opts.nccl == DLT_NCCL_OFF || st->opts.gpus == DLT_GPUS_NONE || st->topo.ngpus == 0)
        return 0;
    rc = dlt_nccl_topo_xml(&st->topo, xml, sizeof(xml));
    if (rc == -ENOTSUP || rc == -ENODATA) { /* no file: NCCL's own detection, said in slurmd's log */
        slurm_info("dltrain: node %s: no NCCL topology file: %s; NCCL detects the topology itself", node,
                   rc == -ENOTSUP ? "NCCL models no CPU of this architecture" : "/proc/cpuinfo names no CPU vendor");
        return 0;
    }
    if (rc < 0)
        return _step_fail(st, "node %s: NCCL topology larger than %d bytes", node, XML_MAX);
    if (spank_get_item(sp, S_JOB_GID, &gid) != ESPANK_SUCCESS)
        return _step_fail(st, "node %s: cannot read the job's gid", node);
    if (dlt_expand_node(st->site.topo_dir, node, st->topo_dir, sizeof(st->topo_dir)) != 0)
        return _step_fail(st, "node %s: topo_dir %s is too long once %%n is expanded", node, st->site.topo_dir);
    if (dlt_topo_dir_check(st->topo_dir, &err) != 0)
        return _step_fail(st, "node %s: %s (fix topo_dir= in plugstack.conf)", node, err.msg);
    if (_step_name(sp, name, sizeof(name)) != 0)
        return _step_fail(st, "node %s: Slurm gives no job or step id (spank_get_item)", node);
    if (dlt_step_dir_create(st->topo_dir, name, TOPO_FILE_NAME, xml, (size_t)rc, gid, st->topo_file,
                            sizeof(st->topo_file), &stale, note, sizeof(note), &st->step_lock, &err) != 0)
        return _step_fail(st, "node %s: %s", node, err.msg);
    if (stale && note[0])
        slurm_error("dltrain: node %s: %s", node, note);
    else if (stale)
        slurm_info("dltrain: node %s: removed a stale %s/%s left by an earlier step of the same id", node, st->topo_dir,
                   name);
    snprintf(st->step_dir, sizeof(st->step_dir), "%s", name);
    {
        /* Folders of steps whose slurmstepd died (kill -9, a crash) are reclaimed by the next step. */
        int swept = 0;
        dlt_err serr = DLT_ERR_INIT;
        if (dlt_step_dir_sweep(st->topo_dir, name, DLT_STEP_DIR_SWEEP_AGE_S, &swept, note, sizeof(note), &serr) != 0)
            slurm_error("dltrain: node %s: %s", node, serr.msg);
        if (note[0])
            slurm_error("dltrain: node %s: %s", node, note);
        if (swept > 0)
            slurm_info("dltrain: node %s: removed %d step folder(s) of %s whose slurmstepd had died", node, swept,
                       st->topo_dir);
    }
    return 0;
}

/* Sets var in the task; a failure is said in slurmd's log and on the task's stderr (the program would
 * otherwise run without it, unaware). 0 or -1. */
static int _setenv(spank_t sp, const char *var, const char *val)
{
    spank_err_t rc = spank_setenv(sp, var, val, 1);
    if (rc == ESPANK_SUCCESS)
        return 0;
    slurm_error("dltrain: cannot set %s in the task: spank_setenv: %s", var, spank_strerror(rc));
    fprintf(stderr, "dltrain: cannot set %s: spank_setenv: %s\n", var, spank_strerror(rc));
    return -1;
}

/* Sets var in the task and notes it in the task's record (DLT_SET), so that a step started from this
 * task can clear what it inherits of ours. */
static void _set(spank_t sp, dlt_plugin_state *st, const char *var, const char *val)
{
    if (_setenv(sp, var, val) == 0 && dlt_env_record_add(st->env_record, sizeof(st->env_record), var, val) != 0)
        fprintf(stderr,
                "dltrain: the record of the variables set here is full at %s: a step started from this task "
                "will not clear it\n",
                var);
}

/* Whether the task's environment has var: a value longer than buf (ESPANK_NOSPACE) is set all the
 * same, and the user's. */
static int _user_has(spank_t sp, const char *var, char *buf, int len)
{
    spank_err_t rc;
    buf[0] = '\0';
    rc = spank_getenv(sp, var, buf, len);
    if (rc == ESPANK_NOSPACE && len > 0)
        buf[len - 1] = '\0'; /* what was copied, cut */
    return rc == ESPANK_SUCCESS || rc == ESPANK_NOSPACE;
}

/* Sets var unless the user's environment already has it; says so under verbose. */
static void _set_unless_user(spank_t sp, dlt_plugin_state *st, const char *var, const char *val, int task)
{
    char cur[256], shown[256];
    if (!val || !*val)
        return;
    if (_user_has(sp, var, cur, sizeof(cur))) {
        dlt_name_escape(cur, shown, sizeof(shown));
        if (st->opts.verbose)
            fprintf(stderr, "dltrain: task %d: keeping your %s=%s (dltrain would set %s)\n", task, var, shown, val);
        return;
    }
    _set(sp, st, var, val);
}

/* Appends name to a ", "-separated list, or "..." once it is full. */
static void _list_add(char *list, size_t len, const char *name)
{
    size_t used = strlen(list);
    if (used + strlen(name) + 6 < len)
        snprintf(list + used, len - used, "%s%s", used ? ", " : "", name);
    else if (used + 5 < len && (used < 3 || strcmp(list + used - 3, "...")))
        snprintf(list + used, len - used, ", ...");
}

void dlt_stepd_task_clear_inherited(spank_t sp)
{
    char was[64], now[64], rec[DLT_ENV_RECORD_MAX], name[64], val[4096], cleared[512] = "", kept[512] = "",
                                                                         failed[512] = "", shown[260];
    const char *cur;
    uint64_t hash;
    uint32_t rank = 1;
    spank_err_t err;
    int r;

    if (spank_getenv(sp, DLT_ENV_STEP, was, sizeof(was)) != ESPANK_SUCCESS)
        return;
    _step_name(sp, now, sizeof(now));
    if (!strcmp(was, now))
        return;
    if (spank_getenv(sp, DLT_ENV_SET, rec, sizeof(rec)) != ESPANK_SUCCESS)
        rec[0] = '\0';
    cur = rec;
    while ((r = dlt_env_record_next(&cur, name, sizeof(name), &hash)) > 0) {
        if (spank_getenv(sp, name, val, sizeof(val)) != ESPANK_SUCCESS)
            continue; /* unset since, or longer than anything the plugin sets: not ours */
        /* A value the user set again after the outer step began is theirs: it stays. */
        if (dlt_env_value_hash(val) != hash) {
            _list_add(kept, sizeof(kept), name);
        } else if ((err = spank_unsetenv(sp, name)) == ESPANK_SUCCESS) {
            _list_add(cleared, sizeof(cleared), name);
        } else {
            _list_add(failed, sizeof(failed), name);
            slurm_error("dltrain: cannot clear the outer step's %s in the task: spank_unsetenv: %s", name,
                        spank_strerror(err));
        }
    }
    if ((err = spank_unsetenv(sp, DLT_ENV_SET)) != ESPANK_SUCCESS ||
        (err = spank_unsetenv(sp, DLT_ENV_STEP)) != ESPANK_SUCCESS) {
        _list_add(failed, sizeof(failed), "the outer step's record (" DLT_ENV_SET ", " DLT_ENV_STEP ")");
        slurm_error("dltrain: cannot clear the outer step's record in the task: spank_unsetenv: %s",
                    spank_strerror(err));
    }
    if (spank_get_item(sp, S_TASK_GLOBAL_ID, &rank) != ESPANK_SUCCESS || rank != 0)
        return;                                 /* said once per step */
    dlt_name_escape(was, shown, sizeof(shown)); /* the user's environment: any bytes */
    if (cleared[0] || kept[0] || failed[0])
        fprintf(stderr, "dltrain: cleared %s (set for the outer step %s, this is step %s)%s%s%s%s%s\n",
                cleared[0] ? cleared : "nothing", shown, now, kept[0] ? "; kept " : "", kept,
                kept[0] ? " (changed since the outer step set them)" : "", failed[0] ? "; could not clear " : "",
                failed);
    if (r < 0) {
        dlt_name_escape(rec, val, 96);
        fprintf(stderr,
                "dltrain: DLT_SET='%s' is malformed: the rest of the outer step's variables were left as "
                "they are\n",
                val);
    }
}

/* Whether a listener of another program already holds port on this node's wildcard address (IPv4,
 * or IPv6 where the node has it): what rank 0's bind of MASTER_PORT will meet. A socket in
 * TIME_WAIT is not a holder (SO_REUSEADDR, as torch.distributed's store binds). 1 taken, 0 free
 * or unknown (no socket could be made: the program's own bind will say). */
static int _port_taken(int port)
{
    int taken = 0, one = 1;
    for (int v6 = 0; v6 < 2 && !taken; v6++) {
        struct sockaddr_in a4;
        struct sockaddr_in6 a6;
        int fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            continue;
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (v6) {
            (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
            memset(&a6, 0, sizeof(a6));
            a6.sin6_family = AF_INET6;
            a6.sin6_addr = in6addr_any;
            a6.sin6_port = htons((uint16_t)port);
            taken = bind(fd, (struct sockaddr *)&a6, sizeof(a6)) != 0 && errno == EADDRINUSE;
        } else {
            memset(&a4, 0, sizeof(a4));
            a4.sin_family = AF_INET;
            a4.sin_addr.s_addr = htonl(INADDR_ANY);
            a4.sin_port = htons((uint16_t)port);
            taken = bind(fd, (struct sockaddr *)&a4, sizeof(a4)) != 0 && errno == EADDRINUSE;
        }
        close(fd);
    }
    return taken;
}

/* The rank contract of this task (torch.distributed's env:// names), each unless the user set it. */
static void _rank_contract_task(spank_t sp, dlt_plugin_state *st, int local_id)
{
    static const struct {
        const char *var;
        spank_item_t item;
    } ints[] = {
        {DLT_ENV_RANK, S_TASK_GLOBAL_ID},
        {DLT_ENV_WORLD_SIZE, S_JOB_TOTAL_TASK_COUNT},
        {DLT_ENV_LOCAL_WORLD_SIZE, S_JOB_LOCAL_TASK_COUNT},
        {DLT_ENV_GROUP_RANK, S_JOB_NODEID},
    };
    char buf[32];
    uint32_t rank = 1;
    int user_port = _user_has(sp, DLT_ENV_MASTER_PORT, buf, sizeof(buf));
    for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
        uint32_t v = 0;
        if (spank_get_item(sp, ints[i].item, &v) != ESPANK_SUCCESS) {
            fprintf(stderr, "dltrain: task %d: Slurm does not give %s here: not set\n", local_id, ints[i].var);
            continue;
        }
        snprintf(buf, sizeof(buf), "%u", v);
        _set_unless_user(sp, st, ints[i].var, buf, local_id);
    }
    snprintf(buf, sizeof(buf), "%d", local_id);
    _set_unless_user(sp, st, DLT_ENV_LOCAL_RANK_TORCH, buf, local_id);
    _set_unless_user(sp, st, DLT_ENV_MASTER_ADDR, st->master_addr, local_id);
    if (st->master_port > 0) {
        snprintf(buf, sizeof(buf), "%d", st->master_port);
        _set_unless_user(sp, st, DLT_ENV_MASTER_PORT, buf, local_id);
        _set(sp, st, DLT_ENV_MASTER_PORT_FROM, st->port_reserved ? "reserved" : "derived");
        /* Every rank takes the derived port without asking the others, so it cannot be moved when
         * it is taken; rank 0's node, where the rendezvous listens, can at least see it and say so
         * before the program fails with EADDRINUSE or joins another job's rendezvous. */
        if (!st->port_reserved && !user_port && spank_get_item(sp, S_TASK_GLOBAL_ID, &rank) == ESPANK_SUCCESS &&
            rank == 0 && _port_taken(st->master_port))
            fprintf(
                stderr,
                "dltrain: warning: MASTER_PORT=%d (derived from the job and step ids) is already in use on rank 0's "
                "node %s: the rendezvous will fail with 'address in use' or meet another program's. Ask for a "
                "reserved port with srun --resv-ports (or have the site set MpiParams=ports=12000-12999 in "
                "slurm.conf), or set MASTER_PORT yourself\n",
                st->master_port, st->master_node[0] ? st->master_node : "?");
    }
    if (st->master_why[0] && local_id == 0)
        fprintf(stderr, "dltrain: %s: %s\n", st->master_addr[0] ? "MASTER_PORT not set" : "MASTER_ADDR not set",
                st->master_why);
}

static int _task_setup(spank_t sp, dlt_plugin_state *st);

/* The task's join mark (common/env_contract.h, DLT_JOIN_MARK): DLT_JOIN_MARK_PREFIX
 * "UID-JOB.STEP.RANK", from Slurm's items alone, so that slurmstepd names the same file at the
 * task's exit. 0, or -1 for a step of one task (nobody waits for it) or without the items. */
static int _join_mark(spank_t sp, char *out, size_t len, uint32_t *uid_out)
{
    uint32_t uid = 0, job = 0, step = 0, rank = 0, ntasks = 0;
    if (spank_get_item(sp, S_JOB_TOTAL_TASK_COUNT, &ntasks) != ESPANK_SUCCESS || ntasks < 2 ||
        spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS || spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_TASK_GLOBAL_ID, &rank) != ESPANK_SUCCESS)
        return -1;
    *uid_out = uid;
    return snprintf(out, len, DLT_JOIN_MARK_PREFIX "%u-%u.%u.%u", uid, job, step, rank) < (int)len ? 0 : -1;
}

/* Whether the exited task made its join mark (a regular file of the job's user; one planted by
 * anybody else is not it), which is removed here either way: 1 made, 0 not, -1 no mark (a step of
 * one task). lstat and unlink only: nothing is opened or followed in /dev/shm. */
static int _join_mark_take(spank_t sp)
{
    char path[160];
    struct stat st;
    uint32_t uid = 0;
    int made;
    if (_join_mark(sp, path, sizeof(path), &uid) != 0)
        return -1;
    if (lstat(path, &st) != 0)
        return 0;
    made = S_ISREG(st.st_mode) && st.st_uid == (uid_t)uid;
    if (made)
        (void)unlink(path);
    return made;
}

int dlt_stepd_task_setup(spank_t sp, dlt_plugin_state *st)
{
    char name[64];
    int rc;
    st->env_record[0] = '\0';
    rc = _task_setup(sp, st);
    if (rc == 0 && st->env_record[0]) {
        _step_name(sp, name, sizeof(name));
        (void)_setenv(sp, DLT_ENV_SET, st->env_record);
        (void)_setenv(sp, DLT_ENV_STEP, name);
    }
    return rc;
}

static int _task_setup(spank_t sp, dlt_plugin_state *st)
{
    char vis[256] = "", gres[256] = "", buf[512], cpus[DLT_CPUS_TEXT_MAX], node[64] = "?";
    dlt_err err = DLT_ERR_INIT;
    dlt_step_gpus sg;
    dlt_binding b;
    dlt_cpuset allowed;
    cpu_set_t mask;
    int local_id = 0;
    uint32_t uid;

    if (st->step_error) {
        fprintf(stderr, "dltrain: %s\n", st->err.msg);
        return -1;
    }
    if (spank_get_item(sp, S_TASK_ID, &local_id) != ESPANK_SUCCESS) {
        fprintf(stderr, "dltrain: cannot read the local task id\n");
        return -1;
    }
    dlt_node_name(node, sizeof(node));
    if (dlt_user_opts_format(&st->opts, buf, sizeof(buf)) == 0)
        _set(sp, st, DLT_ENV_OPTS, buf);
    snprintf(buf, sizeof(buf), "%d", local_id);
    _set(sp, st, DLT_ENV_LOCAL_RANK, buf);
    if (_join_mark(sp, buf, sizeof(buf), &uid) == 0) /* a multi-task step: see dlt_stepd_task_exit */
        _set(sp, st, DLT_ENV_JOIN_MARK, buf);
    _rank_contract_task(sp, st, local_id);
    if (!st->have_topology)
        return 0;
    if (local_id == 0 && st->opts.verbose && st->gpus_why[0])
        fprintf(stderr, "dltrain: node %s: %s\n", node, st->gpus_why);
    if (local_id == 0 && st->opts.verbose) {
        /* Printed from the task, where stderr reaches the user and the node name is known. */
        static char report[16384];
        if (dlt_topo_matrix(&st->topo, node, report, sizeof(report)) >= 0)
            fputs(report, stderr);
    }

    /* Slurm's own choices for this task: its GPUs and its CPU set. */
    if (st->opts.gpus == DLT_GPUS_NONE ||
        spank_getenv(sp, DLT_ENV_CUDA_VISIBLE_DEVICES, vis, sizeof(vis)) != ESPANK_SUCCESS ||
        !strcmp(vis, "NoDevFiles"))
        vis[0] = '\0'; /* gpus=none: a CPU step; GPUs it may see are not the plugin's business */
    if (st->opts.gpus == DLT_GPUS_NONE || spank_getenv(sp, "SLURM_STEP_GPUS", gres, sizeof(gres)) != ESPANK_SUCCESS)
        gres[0] = '\0';
    CPU_ZERO(&mask);
    memset(&allowed, 0, sizeof(allowed));
    if (sched_getaffinity(0, sizeof(mask), &mask) == 0)
        for (int c = 0; c < CPU_SETSIZE && c < DLT_MAX_CPUS; c++)
            if (CPU_ISSET(c, &mask))
                allowed.bits[c / 64] |= 1ull << (c % 64);

    if (dlt_step_gpus_resolve(&st->topo, vis, gres, &sg, &err) != 0 ||
        dlt_binding_choose(&st->topo, &sg, local_id, &allowed, st->opts.nic, &b, &err) != 0) {
        fprintf(stderr, "dltrain: node %s task %d: %s\n", node, local_id, err.msg);
        return -1;
    }
    if (b.gpu >= 0) {
        /* Not in the record: Slurm sets CUDA_VISIBLE_DEVICES for every step with GPUs, and a step
         * without any started from this task runs on this task's GPU. */
        if (dlt_binding_cuda_visible(&sg, &b, st->opts.gpus == DLT_GPUS_STEP, buf, sizeof(buf)) == 0)
            (void)_setenv(sp, DLT_ENV_CUDA_VISIBLE_DEVICES, buf);
        /* Slurm numbers GPUs in PCI order; make CUDA number them the same way. */
        _set_unless_user(sp, st, "CUDA_DEVICE_ORDER", "PCI_BUS_ID", local_id);
        _set(sp, st, DLT_ENV_LOCAL_GPU, sg.label[b.gpu_pos]);
        _set(sp, st, DLT_ENV_GPU_PCI, st->topo.gpus[b.gpu].busid);
    }
    if (b.gpu < 0 && st->opts.bind == DLT_BIND_CLOSEST) {
        /* No GPU to be near (gpus=none, a CPU step): the node's tasks spread over its NUMA nodes. */
        uint32_t local_count = 1;
        (void)spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &local_count);
        b.cpus_numa_local = dlt_binding_numa_cpus(&st->topo, local_id, (int)local_count, &allowed, &b.cpus) >= 0;
    }
    if (st->opts.bind == DLT_BIND_CLOSEST && dlt_cpuset_count(&b.cpus) > 0) {
        CPU_ZERO(&mask);
        for (int c = 0; c < DLT_MAX_CPUS && c < CPU_SETSIZE; c++)
            if ((b.cpus.bits[c / 64] >> (c % 64)) & 1u)
                CPU_SET(c, &mask);
        if (sched_setaffinity(0, sizeof(mask), &mask) != 0) {
            fprintf(stderr, "dltrain: node %s task %d: sched_setaffinity failed: %s\n", node, local_id,
                    strerror(errno));
            return -1;
        }
    }
    if (dlt_cpuset_format(st->opts.bind == DLT_BIND_CLOSEST ? &b.cpus : &allowed, cpus, sizeof(cpus)) == 0)
        _set(sp, st, DLT_ENV_CPUS, cpus);
    else
        fprintf(stderr, "dltrain: node %s task %d: %s not set: the CPU list is longer than %d characters\n", node,
                local_id, DLT_ENV_CPUS, DLT_CPUS_TEXT_MAX - 1);
    if (b.nic >= 0)
        _set(sp, st, DLT_ENV_NIC, st->topo.nics[b.nic].name);
    if (st->opts.nccl == DLT_NCCL_AUTO && st->opts.gpus != DLT_GPUS_NONE) {
        _set_unless_user(sp, st, DLT_ENV_NCCL_TOPO_FILE, st->topo_file, local_id);
        /* The NICs are NCCL's to choose per GPU, from the topology file (ncclTopoGetLocalNet): the
         * interface and HCA lists must be the same on every rank. A task's own nearest netdev as
         * NCCL_SOCKET_IFNAME made its bootstrap listen there, unreachable from ranks on other rails
         * where each rail is its own subnet; a per-rank NCCL_IB_HCA gives every rank a different
         * device 0 (NVIDIA/nccl#1478: "You should not set NCCL_IB_HCA differently on each rank").
         * Exported: the NIC the user named (nic=NAME: one for the whole step), else the site's
         * node-wide lists, else nothing. "=" asks NCCL for an exact match (mlx5_1, not mlx5_10). */
        char hca[96] = "", ifname[96] = "";
        if (st->opts.nic[0] && b.nic >= 0) {
            const dlt_nic *nic = &st->topo.nics[b.nic];
            if (nic->is_ib)
                snprintf(hca, sizeof(hca), "=%s:%d", nic->name, nic->port);
            if (nic->netdev[0])
                snprintf(ifname, sizeof(ifname), "=%s", nic->netdev);
        }
        _set_unless_user(sp, st, DLT_ENV_NCCL_SOCKET_IFNAME, st->opts.nic[0] ? ifname : st->site.nccl_socket_ifname,
                         local_id);
        _set_unless_user(sp, st, DLT_ENV_NCCL_IB_HCA, st->opts.nic[0] ? hca : st->site.nccl_ib_hca, local_id);
        /* The task may run in another mount namespace than slurmstepd's: a container entered by a
         * plugin listed before this one in plugstack.conf (pyxis joins the container's namespaces
         * in its own task_init). There the host's topo_dir may be missing and NCCL would ignore
         * the file without a word at its default log level. Checked as the task's user. */
        if (local_id == 0 && st->topo_file[0] &&
            spank_getenv(sp, DLT_ENV_NCCL_TOPO_FILE, buf, sizeof(buf)) == ESPANK_SUCCESS &&
            !strcmp(buf, st->topo_file)) {
            char why[1024];
            if (dlt_topo_file_check(st->topo_file, why, sizeof(why)) != 0)
                fprintf(stderr, "dltrain: node %s: warning: %s\n", node, why);
        }
    }
    if (st->opts.verbose)
        fprintf(stderr, "dltrain: node %s task %d: GPU %s (%s) cpus %s%s nic %s (%s)\n", node, local_id,
                b.gpu >= 0 ? sg.label[b.gpu_pos] : "none", b.gpu >= 0 ? st->topo.gpus[b.gpu].busid : "-", cpus,
                st->opts.bind == DLT_BIND_NONE ? " (bind=none)"
                : b.cpus_numa_local            ? " (NUMA-local)"
                : b.gpu >= 0                   ? " (Slurm's set: GPU-local CPUs not allowed)"
                                               : " (Slurm's set: one NUMA node, or none of its own allowed)",
                b.nic >= 0 ? st->topo.nics[b.nic].name : "none", dlt_distance_name(b.nic_distance));
    return 0;
}

void dlt_stepd_step_cleanup(spank_t sp, dlt_plugin_state *st)
{
    dlt_err err = DLT_ERR_INIT;
    (void)sp;
    if (!st->step_dir[0])
        return;
    if (dlt_step_dir_remove(st->topo_dir, st->step_dir, st->step_lock, &err) != 0)
        slurm_error("dltrain: %s", err.msg);
    st->step_dir[0] = '\0';
    st->step_lock = -1;
}

/* slurm_kill_job_step(job, step, SIGKILL) of slurmstepd's own libslurm (dlsym: the plugin links
 * nothing of Slurm's): 0, or -1 with errno (ENOSYS: this slurmstepd has none). */
static int _kill_step(uint32_t job, uint32_t step)
{
    typedef __typeof__(slurm_kill_job_step) kill_step_fn;
    kill_step_fn *kill_step = (kill_step_fn *)dlsym(RTLD_DEFAULT, "slurm_kill_job_step");
    if (!kill_step) {
        errno = ENOSYS;
        return -1;
    }
#ifdef DLT_SLURM_KILL_STEP_FLAGS
    return kill_step(job, step, SIGKILL, 0);
#else
    return kill_step(job, step, SIGKILL);
#endif
}

static const char *_slurm_strerror(int code)
{
    char *(*str)(int) = (char *(*)(int))dlsym(RTLD_DEFAULT, "slurm_strerror");
    return code == ENOSYS ? "this slurmstepd has no slurm_kill_job_step (use srun --kill-on-bad-exit=1)"
           : str          ? str(code)
                          : strerror(code);
}

/* What came of a step end (what: "node N: task R ...; step J.S"). */
static void _end_said(int ended, int code, const char *what)
{
    if (ended)
        slurm_error("dltrain: %s ended so that its peers do not wait for it", what);
    else
        slurm_info("dltrain: %s not ended again (%s)", what, _slurm_strerror(code));
}

/* A task of a multi-task step killed by a signal (the OOM killer, kill -9, a crash) cannot tell its
 * peers: they wait in their next collective until a watchdog fires (--stall-timeout, NCCL's timeout),
 * 15 minutes or more, holding the allocation: the whole step is ended at once, as srun
 * --kill-on-bad-exit would, through slurmstepd's own Slurm API. Nor can a task that fails before it
 * joined the job's PMIx bootstrap (its join mark, DLT_JOIN_MARK): its peers wait in their first
 * fence for the whole bootstrap timeout (300 s) for a rank Slurm already knows is gone; the step is
 * ended DLT_STEP_END_GRACE_S later (step_end.h), so that peers failing alike finish saying why. A
 * non-zero exit after joining is left alone: dltrain ends every rank itself naming the cause, and
 * killing the others at the first exit would cut that message or a checkpoint being written; so are
 * 0, 2 (a usage error: every rank finds it alike before the bootstrap, and one says it) and 75
 * (stopped after a complete checkpoint). */
void dlt_stepd_task_exit(spank_t sp, dlt_plugin_state *st)
{
    uint32_t job = 0, step = 0, ntasks = 0, rank = 0;
    int status = 0, sig = 0, joined, early = 0;
    char node[64] = "?", why[128], what[256];

    joined = _join_mark_take(sp); /* taken whatever follows: /dev/shm keeps nothing of the step */
    if (st->step_ending || spank_get_item(sp, S_TASK_EXIT_STATUS, &status) != ESPANK_SUCCESS)
        return;
    if (WIFSIGNALED(status)) {
        /* Only deaths no peer hears of: the kernel's or a crash's. SIGTERM, SIGINT, SIGHUP,
         * SIGUSR1... come to every task of the step (scancel, the time limit, preemption): its other
         * ranks are answering the same signal (saving a checkpoint), and must not be killed in the
         * middle of it. */
        switch (WTERMSIG(status)) {
        case SIGKILL:
        case SIGSEGV:
        case SIGBUS:
        case SIGABRT:
        case SIGFPE:
        case SIGILL:
        case SIGSYS:
        case SIGTRAP: break;
        default: return;
        }
        sig = WTERMSIG(status);
        snprintf(why, sizeof(why), "ended by signal %d (%s)", sig, strsignal(sig));
    } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0 && WEXITSTATUS(status) != 2 && WEXITSTATUS(status) != 75 &&
               joined == 0) {
        snprintf(why, sizeof(why), "exited with status %d before it joined the job's PMIx bootstrap",
                 WEXITSTATUS(status));
        early = 1;
    } else {
        return;
    }
    if (spank_get_item(sp, S_JOB_TOTAL_TASK_COUNT, &ntasks) != ESPANK_SUCCESS || ntasks < 2)
        return;
    (void)spank_get_item(sp, S_TASK_GLOBAL_ID, &rank);
    (void)spank_get_item(sp, S_JOB_ID, &job);
    (void)spank_get_item(sp, S_JOB_STEPID, &step);
    dlt_node_name(node, sizeof(node));
    st->step_ending = 1;
    snprintf(what, sizeof(what), "node %s: task %u %s; step %u.%u of %u tasks", node, rank, why, job, step, ntasks);
    /* A failure before the bootstrap is often every rank's (a wrapper, an import that fails
     * everywhere): a grace lets the others say theirs; a rank killed outright has nothing to say. */
    if (early && dlt_step_end_after(&st->end, DLT_STEP_END_GRACE_S, job, step, what, _kill_step, _end_said) == 0)
        return;
    if (_kill_step(job, step) != 0) {
        _end_said(0, errno, what);
        return;
    }
    slurm_error("dltrain: node %s: task %u %s; ending step %u.%u at once so that its %u peer(s) do not wait for it",
                node, rank, why, job, step, ntasks - 1);
}

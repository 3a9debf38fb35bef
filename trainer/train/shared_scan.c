/* SPDX-License-Identifier: Apache-2.0 */
/* shared_scan: one scan of an image folder per job (shared_scan.h). */
#include "config.h"

#include "trainer/train/shared_scan.h"

#include "trainer/comm/agree.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/node_name.h"
#include "common/status.h"
#include "trainer/data/folder_index.h"
#include "trainer/data/folder_list.h"

#define PIECE ((size_t)4 << 20)

/* What rank 0 sends once its scan succeeded: the list's size, its node, its path. */
typedef struct {
    uint64_t len;
    char node[64];
    char path[4096];
} scan_head;

/* The list, in pieces (the NCCL communicator stages through a buffer of the piece's size). */
static int _send_list(dlt_comm *comm, uint8_t *buf, size_t len)
{
    for (size_t off = 0; off < len; off += PIECE) {
        size_t n = len - off < PIECE ? len - off : PIECE;
        int rc = comm->ops->bcast(comm, buf + off, n, 0);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* The folder as rank 0 sees it: from its index when that still matches, else listed. With list
 * (may be NULL: not wanted) its list too. */
static int _list_folder(const char *path, const char *labels, dlt_dataset **ds, uint8_t **list, size_t *len,
                        dlt_shared_scan_info *info, dlt_err *err)
{
    int rc;
    if (!labels) {
        char why[256];
        int got = dlt_folder_index_read(path, ds, list, len, why, sizeof(why));
        if (got == 0) {
            info->from_index = 1;
            return 0;
        }
        if (got < 0)
            snprintf(info->index_note, sizeof(info->index_note), "%s", why);
    }
    rc = dlt_dataset_open_folder(ds, path, labels, err);
    if (rc == 0 && list && (rc = dlt_folder_list_pack(*ds, list, len, err)) != 0) {
        dlt_dataset_close(*ds);
        *ds = NULL;
    }
    return rc;
}

int dlt_shared_scan_open(dlt_comm *comm, const char *path, const char *labels, dlt_dataset **out,
                         dlt_shared_scan_info *info, dlt_err *err)
{
    dlt_agreement a = dlt_agreement_of_comm(comm);
    scan_head h;
    uint8_t *buf = NULL;
    size_t len = 0;
    char node[64] = "?";
    int rc = 0, crc;
    dlt_dataset *ds = NULL;

    *out = NULL;
    memset(info, 0, sizeof(*info));
    if (comm->size < 2)
        return _list_folder(path, labels, out, NULL, NULL, info, err);
    dlt_node_name(node, sizeof(node));
    memset(&h, 0, sizeof(h));
    if (comm->rank == 0) {
        double t0 = dlt_now();
        rc = _list_folder(path, labels, &ds, &buf, &len, info, err);
        info->scan_seconds = dlt_now() - t0;
        h.len = rc == 0 ? len : 0;
        snprintf(h.node, sizeof(h.node), "%s", node);
        snprintf(h.path, sizeof(h.path), "%s", path);
    }
    /* Only rank 0 can fail here: every rank stops with its words. */
    if ((crc = dlt_agree_first_failure_as_is(&a, rc, err)) != 0 ||
        (crc = dlt_agree_share(&a, &h, sizeof(h), 0, err)) != 0) {
        free(buf);
        dlt_dataset_close(ds);
        return crc;
    }
    h.node[sizeof(h.node) - 1] = h.path[sizeof(h.path) - 1] = '\0';
    len = (size_t)h.len;
    info->list_bytes = len;
    /* A rank that has no room for the list says so before the sending, which every rank then skips. */
    if (comm->rank != 0 && !(buf = malloc(len ? len : 1)))
        rc = dlt_fail(err, -ENOMEM, "out of memory for the list of %s (%zu bytes)", path, len);
    if ((crc = dlt_agree_first_failure(&a, rc, node, err)) != 0) {
        free(buf);
        dlt_dataset_close(ds);
        return crc;
    }
    if ((crc = _send_list(comm, buf, len)) != 0) {
        free(buf);
        dlt_dataset_close(ds);
        return crc;
    }
    if (comm->rank != 0 && strcmp(path, h.path)) {
        /* Given another path than rank 0's: maybe another folder. This rank lists its own, and the
         * comparison of the ranks' digests that follows says whether they are the same. */
        rc = dlt_dataset_open_folder(&ds, path, labels, err);
    } else if (comm->rank != 0) {
        rc = dlt_folder_list_open(&ds, path, buf, len, err);
        if (rc == 0 && strcmp(node, h.node)) {
            info->sampled = 1;
            rc = dlt_folder_list_check_sample(ds, DLT_SHARED_SCAN_SAMPLE, (uint64_t)len * 0x9e3779b97f4a7c15ull, err);
            if (rc != 0)
                rc = dlt_fail_prefix(err, rc,
                                     "%s as listed on node %s (rank 0) is not what this node sees: the nodes do not "
                                     "share that folder (another copy mounted there, or a mount missing)",
                                     path, h.node);
        }
    }
    free(buf);
    if ((crc = dlt_agree_first_failure(&a, rc, node, err)) != 0) {
        dlt_dataset_close(ds);
        return crc;
    }
    *out = ds;
    return 0;
}

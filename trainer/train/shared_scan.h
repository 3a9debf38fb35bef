/* SPDX-License-Identifier: Apache-2.0 */
/* shared_scan: one scan of an image folder per job. Rank 0 lists the folder; the others receive
 * its list over the communicator (folder_list.h: about 20 MB for ImageNet, in 4 MiB pieces) and
 * build the same data set; ranks on other nodes than rank 0's look at a few of the listed files
 * (chosen by seed) and refuse, naming their node, when their filesystem does not hold them. A rank
 * given another path than rank 0's lists its own folder, as before (the digests compared before the
 * first step then say whether it is the same data). Rank 0 reads the folder's index instead of
 * listing it when one is there and still matches (folder_index.h). At 64
 * ranks a 1.28M-image folder costs the metadata server one scan instead of 64. */
#ifndef DLT_SHARED_SCAN_H
#define DLT_SHARED_SCAN_H

#include <stddef.h>

#include "common/status.h"
#include "trainer/comm/comm.h"
#include "trainer/data/dataset.h"

/* Files each rank on another node looks at. */
#define DLT_SHARED_SCAN_SAMPLE 16

typedef struct {
    double scan_seconds;  /* rank 0's scan (0 on the others) */
    size_t list_bytes;    /* the list sent */
    int sampled;          /* this rank looked at DLT_SHARED_SCAN_SAMPLE files (another node than rank 0's) */
    int from_index;       /* rank 0 read the folder's index (folder_index.h) instead of listing it */
    char index_note[320]; /* why an index there was not used ("" when none or used) */
} dlt_shared_scan_info;

/* The ImageFolder at path (labels: a labels file, or NULL) as every rank of comm sees it, scanned
 * once. Collective: every rank calls it with its own path of the same folder. On failure every rank
 * returns the same status and the same words in err: rank 0's own when it could not list the folder,
 * else the lowest failing rank's, prefixed with its rank and node. */
int dlt_shared_scan_open(dlt_comm *comm, const char *path, const char *labels, dlt_dataset **out,
                         dlt_shared_scan_info *info, dlt_err *err);

#endif

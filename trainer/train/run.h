/* run: what training, evaluation and the benchmark share: the run's parts (backend, network,
 * batch source, gradient reducer, loss scaler, log) opened and closed together, and the steps all
 * three take: load a batch, forward + loss + backward (replayed as a CUDA graph when asked), reduce
 * the gradients, apply SGD. Errors go to one buffer, given at open, that the command prints. */
#ifndef DLT_RUN_H
#define DLT_RUN_H

#include <stdint.h>

#include "trainer/backend/backend.h"
#include "trainer/comm/comm.h"
#include "trainer/comm/grad_reducer.h"
#include "trainer/data/source.h"
#include "trainer/model/network.h"
#include "trainer/train/loss_scaler.h"
#include "trainer/train/run_log.h"
#include "trainer/train/trainer.h"

typedef enum { DLT_RUN_TRAIN, DLT_RUN_EVAL, DLT_RUN_BENCH } dlt_run_purpose;

typedef struct {
    dlt_train_config cfg; /* the run's settings; the class count may come from the data */
    dlt_comm *comm;
    dlt_backend *be;
    dlt_net net;
    dlt_source src;
    dlt_grad_reducer *reducer;
    dlt_loss_scaler scaler;
    dlt_run_log log;
    uint8_t *images; /* the batch on the host */
    int32_t *labels;
    int graph_warm, graph_ready; /* --cuda-graphs: a plain step ran; a recording exists */
    double graph_scale;          /* the loss scale the recording was made with */
    char *err;                   /* the run's error buffer (the backend's and communicator's sink too) */
    size_t errlen;
    int agreed;                  /* the run ends on a decision every rank took together (no abort needed) */
} dlt_run;

/* Opens the batch source (the training or validation images, or generated ones), the backend,
 * the network and the reducer. err must be the communicator's error buffer or outlive the run. */
int dlt_run_open(dlt_run *r, const dlt_train_config *c, dlt_comm *comm, dlt_run_purpose purpose, char *err,
                 size_t errlen);
/* failed: the run ends on an error. Unless every rank took that decision together (r->agreed),
 * a run of several ranks prints the error and aborts the communicator, so the other ranks, which
 * may be waiting in a collective for this one, end now instead of at the stall watchdog. */
void dlt_run_close(dlt_run *r, int failed);
/* Every rank learns the bad files the others found (each is reported once per run); returns the
 * run's total of distinct bad files, the same on every rank. A collective: all ranks call it at the
 * same points. */
int64_t dlt_run_share_bad_images(dlt_run *r);

/* The batch of (epoch, step), normalised into the network's input. */
int dlt_run_load_batch(dlt_run *r, int64_t epoch, int64_t step);
/* The host batch (r->images) normalised into the network's input. */
int dlt_run_normalize(dlt_run *r);
/* The validation images of a training run (ROOT/val, --val-data, or generated ones), started:
 * 1 when there are some, 0 when there are none, negative on an error. */
int dlt_run_open_validation(dlt_run *r, dlt_source *val);
/* One evaluation of the current weights over every image of src (each exactly once over the
 * ranks; the network's training state untouched): counts = {top-1 hits, top-5 hits, images},
 * summed over the ranks. A collective. */
int dlt_eval_pass(dlt_run *r, dlt_source *src, double counts[3]);
/* Forward, loss and backward of the loaded batch for this rank (summed loss, top-1/top-5 hits);
 * backward hands finished gradients to the reducer. */
int dlt_run_forward_backward(dlt_run *r, double *loss_sum, int *top1, int *top5);
/* Forward and loss over the first n images of the batch (training: batch statistics, label
 * smoothing, the loss scale and d(logits); else evaluation); NULL results are not wanted. */
int dlt_run_forward_loss(dlt_run *r, int training, int n, double *loss_sum, int *top1, int *top5);
/* Completes the gradient sum over ranks (see dlt_grad_reducer_finish). */
int dlt_run_reduce(dlt_run *r, int host_collective_next);
/* SGD with momentum at lr over every parameter, undoing the loss scale and the rank sum. */
int dlt_run_sgd(dlt_run *r, double lr);

#endif

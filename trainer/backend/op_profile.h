/* SPDX-License-Identifier: Apache-2.0 */
/* op_profile: where a training step's time goes, by class of backend op. The backend's ops table
 * is wrapped so that every timed call is bracketed by two marks on the backend's own timeline (CUDA
 * events on its stream on a GPU, be->timer; the host clock on the CPU, whose ops have finished when
 * they return); the marks are read once per step, after the step's one wait. The wrapped calls
 * still run the backend's own ops, in the same order, on the same data: a profiled step computes
 * what an unprofiled one does. */
#ifndef DLT_OP_PROFILE_H
#define DLT_OP_PROFILE_H

#include <stdio.h>

#include "trainer/backend/backend.h"

typedef enum {
    DLT_OPC_CONV_FWD,
    DLT_OPC_CONV_BWD_DATA,
    DLT_OPC_CONV_BWD_FILTER,
    DLT_OPC_BN,          /* batch norm forward and backward, fused BN+add+ReLU, running statistics */
    DLT_OPC_ELEMENTWISE, /* add+ReLU, ReLU backward, residual gradient sums */
    DLT_OPC_POOL,        /* max and average pooling, both ways */
    DLT_OPC_FC,          /* the classifier, both ways */
    DLT_OPC_LOSS,        /* softmax cross-entropy, the non-finite check, the step's results */
    DLT_OPC_INPUT,       /* the batch's copy in and its normalization */
    DLT_OPC_SGD,         /* the flat optimizer */
    DLT_OPC_COPY,        /* copies inside the backend and between it and the host */
    DLT_OPC_COUNT
} dlt_op_class;

/* Marks one step may hold (two per timed call); a step with more is reported as cut short. */
#define DLT_OP_PROFILE_MARKS 8192

typedef struct {
    dlt_backend *be;
    const dlt_backend_ops *real; /* the backend's own table, put back by detach */
    dlt_backend_ops ops;         /* the wrapping table be->ops points to while attached */
    int marks;                   /* marks of the step so far */
    int overflow;                /* a step ran out of marks */
    unsigned char klass[DLT_OP_PROFILE_MARKS / 2];
    double host_mark[DLT_OP_PROFILE_MARKS]; /* the host clock's marks (no be->timer) */
    int steps;                              /* steps read */
    double ms[DLT_OPC_COUNT];               /* summed over the steps read */
    long long calls[DLT_OPC_COUNT];
    double step_ms; /* first mark to last, summed */
} dlt_op_profile;

/* Wraps be's ops table (be->ops points to p->ops until detach). */
void dlt_op_profile_attach(dlt_op_profile *p, dlt_backend *be);
void dlt_op_profile_detach(dlt_op_profile *p);
/* A step starts: its first mark. */
int dlt_op_profile_step_begin(dlt_op_profile *p);
/* After the step's calls: its last mark, then (on a GPU, once that mark has passed) every pair read
 * into the sums. */
int dlt_op_profile_step_end(dlt_op_profile *p);

/* The table (text) or the JSON member "profile": {...} of the steps read: per
 * class the milliseconds per step, the share of the step and the calls per step; "other" is the
 * step's time outside the timed calls (waits for the all-reduce, host gaps between launches). */
void dlt_op_profile_print(const dlt_op_profile *p, FILE *f, const char *timeline);
void dlt_op_profile_json(const dlt_op_profile *p, FILE *f);

#endif

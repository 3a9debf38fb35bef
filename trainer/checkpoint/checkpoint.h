/* SPDX-License-Identifier: Apache-2.0 */
/* checkpoint: a model file whose tensors carry torchvision's resnet state_dict names and shapes
 * (loadable by torchvision.models.resnetNN().load_state_dict(safetensors.torch.load_file(f))), and
 * a state file beside it with the optimizer's momentum, the step counters and the run's settings.
 * Both are written atomically; a pair is valid only when the state file names the model file's
 * size and CRC. */
#ifndef DLT_CHECKPOINT_H
#define DLT_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "trainer/model/network.h"

typedef struct {
    int64_t step;  /* optimizer steps done */
    int64_t epoch; /* epoch the next step belongs to */
    uint64_t seed;
    char config[1024];       /* the run's settings (dlt_run_config_text): a resume compares them with its own
                              * (dlt_resume_compare) and refuses a changed one, naming both values, unless
                              * --resume-override names it; arch, width, image size and classes never may */
    const char *class_names; /* saving: the class names one a line, in the order of the model's outputs
                              * (NULL: the data has none); kept as the state file's "class_names" */
    char history[2048];      /* settings changed on resume with --resume-override ("step 40: --batch 8 -> 16; ...") */
    char data[256];          /* what the run trained on ("source=images images=N classes=C files=HEX names=HEX",
                              * dlt_run_data_text): a resume on other data is refused; "" unknown (an older
                              * dltrain wrote none) */
    /* The line of checkpoints this one belongs to (a run from scratch, or one that went back to an
     * older checkpoint than its folder's newest, starts a new line numbered above every line in the
     * folder) and where the line branched off: parent_line/parent_step, -1 for a line that starts
     * from scratch. Files of an older dltrain carry none: line 0, no parent. */
    int64_t line, parent_line, parent_step;
    /* Time over every incarnation of the run up to this checkpoint: its training time (each run's
     * time from its start to its checkpoint, added up) and the UNIX time of the first start (wall
     * time since then counts the waits between incarnations too); 0: not recorded (an older file). */
    double train_seconds, first_start;
} dlt_train_state;

/* The state file's metadata fields written only when known (data, ...). */
#define DLT_CKPT_OPTIONAL_META 8

/* Writes DIR/ckpt-STEP.safetensors and DIR/ckpt-STEP.state.safetensors. paths receives the model
 * file's path. */
int dlt_checkpoint_save(const dlt_net *net, const dlt_train_state *st, const char *dir, char *path, size_t pathlen,
                        dlt_err *err);

/* Loads a model file (and its state file when st is not NULL) into net, after checking every
 * tensor's name, dtype and shape against the model. A foreign, truncated or mismatched file is
 * refused and net is left unchanged. */
int dlt_checkpoint_load(dlt_net *net, const char *model_path, dlt_train_state *st, dlt_err *err);

/* Weights to start a run from (fine-tuning): a model file with torchvision's names (ours, or
 * torchvision.models.resnetNN(weights=...).state_dict() saved with safetensors), strict on names,
 * dtypes and shapes, except that a classifier of another class count is left as initialised
 * (*fc_classes then gets the file's count, else 0). Parameters, BN statistics and counters only:
 * no optimizer state. An error names the first tensor that does not fit. */
int dlt_checkpoint_load_init(dlt_net *net, const char *path, int *fc_classes, dlt_err *err);

/* What dlt_checkpoint_verify found. */
typedef struct {
    int verified;            /* a state file lies beside the model file and its size and CRC match */
    int state_data_verified; /* the state file matched the CRC it records for itself (header and data) */
    int tensors;             /* in the model file */
    size_t size;
    uint32_t crc;
    int64_t step, epoch; /* from the state file (-1 without one) */
    char state_path[4096];
    char config[1024];
    char history[2048]; /* settings changed on resume (--resume-override), "" when none */
} dlt_checkpoint_info;

/* Checks a model file without loading it into a model: it parses as safetensors; when its state
 * file lies beside it, that file parses, is dltrain's, records the model file's size and CRC-32
 * and both match (and its own data matches the CRC it records). Returns 0 with info->verified 1,
 * 0 with info->verified 0 when there is no state file (the file cannot be verified), or a
 * negative status with err saying what is wrong. */
int dlt_checkpoint_verify(const char *model_path, dlt_checkpoint_info *info, dlt_err *err);

/* The class names a checkpoint's state file records (one a line, in the order of the model's
 * outputs) into *list (malloc'd), or *list NULL when there is no state file or it records none
 * (written before dltrain kept them). An unreadable state file is left for the load to report. */
void dlt_checkpoint_class_names(const char *model_path, char **list);
/* The state file's path for a model file's. */
int dlt_checkpoint_state_path(const char *model_path, char *out, size_t outlen);

/* The step of a file named "ckpt-DIGITS.safetensors" or "ckpt-DIGITS.state.safetensors" followed
 * by *rest (empty for the checkpoint itself, ".tmp.PID" for a save in progress); *is_state says
 * which of the pair. -1 for any other name. */
long long dlt_checkpoint_name_step(const char *name, int *is_state, const char **rest);

/* The highest step of a ckpt-STEP file (model or state) in dir, or -1 when it has none. */
int64_t dlt_checkpoint_dir_max_step(const char *dir);

/* A checkpoint's line, from its state file's header alone (its tensors are not read). */
typedef struct {
    int64_t line, parent_line, parent_step; /* as dlt_train_state's; 0, -1, -1 when not recorded */
} dlt_checkpoint_lineage;
/* 0, or -errno when the state file cannot be read (then *l says line 0, no parent). */
int dlt_checkpoint_lineage_of(const char *model_path, dlt_checkpoint_lineage *l);

/* The checkpoints of a folder in the order --resume auto prefers them: the newest line (the
 * highest line number) newest step first, then the line it branched from at and below its branch
 * point, and so on down the chain; then the rest (abandoned lines) by line and step, newest first.
 * Checkpoints without lines (an older dltrain's: all line 0) come by step, newest first. A step
 * with only one file of its pair is in the list with has_model/has_state saying which. *list is
 * malloc'd (NULL when n is 0). Returns 0, or a negative errno with err when dir cannot be read (a
 * missing dir is an empty list). */
typedef struct {
    long long step;
    char name[256]; /* the model file's name (as found, or as the state file implies) */
    int has_model, has_state;
    int unreadable; /* its state file's header could not be read: placed in the newest line */
    dlt_checkpoint_lineage lineage;
} dlt_checkpoint_entry;
int dlt_checkpoint_list(const char *dir, dlt_checkpoint_entry **list, int *n, dlt_err *err);

#define DLT_CKPT_SCAN_MAX 16
/* A checkpoint directory, for --resume auto. */
typedef struct {
    int found; /* path: the newest checkpoint whose pair verifies */
    char path[4096];
    int64_t step;
    int candidates; /* checkpoints present (by step: a model file, a state file, or both) */
    int refused;    /* checked and refused: all of them when none is valid, else the newer ones */
    struct {
        char path[1024];
        char why[512];
    } refusal[DLT_CKPT_SCAN_MAX]; /* the first DLT_CKPT_SCAN_MAX refused, newest first */
    int passed;                   /* found: checkpoints of higher steps in lines a rollback left */
    struct {
        char path[1024];
        char why[256];
    } passed_over[DLT_CKPT_SCAN_MAX]; /* the first DLT_CKPT_SCAN_MAX of them, newest line first */
} dlt_checkpoint_scan;

/* Scans dir: candidates 0 when it has no checkpoint (or does not exist). Returns 0, or a negative
 * status with err when the directory cannot be read (then nothing can be said about it). */
int dlt_checkpoint_scan_dir(const char *dir, dlt_checkpoint_scan *s, dlt_err *err);

/* The value of key in a settings record ("k1=v1 k2=v2 ...", dlt_train_state.config) into out;
 * 1 when present, 0 when absent. */
int dlt_checkpoint_config_field(const char *config, const char *key, char *out, size_t outlen);

#endif

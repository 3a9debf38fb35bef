/* checkpoint: a model file whose tensors carry torchvision's resnet state_dict names and shapes
 * (loadable by torchvision.models.resnetNN().load_state_dict(safetensors.torch.load_file(f))), and
 * a state file beside it with the optimizer's momentum, the step counters and the run's settings.
 * Both are written atomically; a pair is valid only when the state file names the model file's
 * size and CRC. */
#ifndef DLT_CHECKPOINT_H
#define DLT_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "trainer/model/network.h"

typedef struct {
    int64_t step;         /* optimizer steps done */
    int64_t epoch;        /* epoch the next step belongs to */
    uint64_t seed;
    char config[1024];    /* the run's settings, for the record and to refuse a mismatched resume */
} dlt_train_state;

/* Writes DIR/ckpt-STEP.safetensors and DIR/ckpt-STEP.state.safetensors. paths receives the model
 * file's path. */
int dlt_checkpoint_save(const dlt_net *net, const dlt_train_state *st, const char *dir, char *path, size_t pathlen,
                        char *err, size_t errlen);

/* Loads a model file (and its state file when st is not NULL) into net, after checking every
 * tensor's name, dtype and shape against the model. A foreign, truncated or mismatched file is
 * refused and net is left unchanged. */
int dlt_checkpoint_load(dlt_net *net, const char *model_path, dlt_train_state *st, char *err, size_t errlen);

/* The newest valid checkpoint in dir (model path), or -ENOENT. Invalid ones are skipped and
 * reported through the callback when given. */
int dlt_checkpoint_find_latest(const char *dir, char *path, size_t pathlen, void (*skipped)(const char *path,
                               const char *why, void *arg), void *arg);

#endif

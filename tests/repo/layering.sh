#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The trainer's layering, read from its includes and names: comm/ includes nothing from model/
# (the gradient listener is comm's own header), nothing above model/network.c touches batch-norm
# state (d_stats, bn_batches: network.c's verbs do), the training step lives in one file
# (train/step.c: no other file queues it), and no module above the reducer asks for it by name.
# Lists each offending line.
. "$(dirname "$0")/../slurm/lib.sh"
cd "$DLT_SRCDIR/trainer" || exit 1
tap_plan 7
src() { find "$@" -name '*.[ch]' -print0 | xargs -0 grep -n "${GREP_ARGS[@]}" 2>/dev/null; }
GREP_ARGS=(-e '#include "trainer/model/')
hits=$(src comm)
if [[ -z $hits ]]; then ok "comm/ includes nothing from model/"; else not_ok "comm/ includes model/"; echo "$hits" | diag; fi
GREP_ARGS=(-e 'd_stats' -e 'bn_batches')
hits=$(src train cli checkpoint)
if [[ -z $hits ]]; then ok "nothing in train/, cli/ or checkpoint/ touches d_stats or bn_batches"
else not_ok "batch-norm state touched above network.c"; echo "$hits" | diag; fi
GREP_ARGS=(-e 'sgd_step' -e 'dlt_grad_reducer_agree' -e 'dlt_net_backward')
hits=$(src train | grep -v '^train/step\.c:')
if [[ -z $hits ]]; then ok "the step's backward, agreement and update are queued in train/step.c alone"
else not_ok "the step is queued outside train/step.c"; echo "$hits" | diag; fi
GREP_ARGS=(-e '"nccl-buckets"' -e '"host"' -e '"none"')
hits=$(src train cli | grep -i 'strcmp.*ops->name\|ops->name.*strcmp')
if [[ -z $hits ]]; then ok "no reducer path is asked for by name above comm/"
else not_ok "a reducer path asked for by name"; echo "$hits" | diag; fi
GREP_ARGS=(-e '#include "trainer/data/dataset_internal.h"')
hits=$(src . | grep -v '^\./data/')
if [[ -z $hits ]]; then ok "the data set's representation (data/dataset_internal.h) is included in data/ only"
else not_ok "dataset_internal.h included outside data/"; echo "$hits" | diag; fi
GREP_ARGS=(-e '#include "trainer/comm/' -e '#include "trainer/train/' -e '#include "trainer/cli/')
hits=$(src data)
if [[ -z $hits ]]; then ok "data/ includes nothing from comm/, train/ or cli/ (the one-scan listing is train/shared_scan.c)"
else not_ok "data/ includes a higher floor"; echo "$hits" | diag; fi
GREP_ARGS=(-e '#include "trainer/cli/')
hits=$(src train check data comm model backend checkpoint common)
if [[ -z $hits ]]; then ok "only cli/ includes cli/ (the checks before a run are train/preflight.c)"
else not_ok "a lower floor includes cli/"; echo "$hits" | diag; fi

/* SPDX-License-Identifier: Apache-2.0 */
/* tb_writer: a TensorBoard event file (TFRecord records of tensorflow.Event protobufs, the file
 * SummaryWriter writes) with scalar summaries, encoded by hand: no TensorFlow, no protobuf. */
#ifndef DLT_TB_WRITER_H
#define DLT_TB_WRITER_H

#include "common/status.h"
#include <stddef.h>
#include <stdint.h>

typedef struct dlt_tb_writer dlt_tb_writer;

/* Creates dir when missing (with its parents) and a new file in it,
 * DIR/events.out.tfevents.<unix time>.<host> (".N" added when that name exists: a resumed run in
 * the same second), holding the file_version event "brain.Event:2". */
int dlt_tb_open(dlt_tb_writer **out, const char *dir, dlt_err *err);
const char *dlt_tb_path(const dlt_tb_writer *w);

/* Queues one scalar: an Event {wall_time: now, step, summary {value {tag, simple_value}}}. */
int dlt_tb_scalar(dlt_tb_writer *w, const char *tag, int64_t step, double value);

/* Appends what is queued in one write to the file opened O_APPEND, as the metrics file takes
 * one line per interval: a killed run loses at most the interval it was in. */
int dlt_tb_flush(dlt_tb_writer *w, dlt_err *err);

/* Flushes (what cannot be written is lost silently: the caller flushed at each interval and
 * said so on failure) and frees. NULL is fine. */
void dlt_tb_close(dlt_tb_writer *w);

/* One TFRecord around an encoded Event: uint64 length, masked CRC-32C of those 8 bytes, the
 * data, masked CRC-32C of the data (all little-endian). Writes len + 16 bytes into out. */
void dlt_tb_frame(uint8_t *out, const uint8_t *data, size_t len);

#endif

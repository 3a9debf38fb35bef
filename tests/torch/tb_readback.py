# SPDX-License-Identifier: Apache-2.0
"""Reads dltrain's --tensorboard event file back with the tensorboard package and compares it with
the --metrics file (tests/torch/tensorboard.sh).

  tb_readback.py compare METRICS DIR   every scalar, tag and step equal to the metrics file's
  tb_readback.py damage DIR WORK       a flipped byte makes tensorboard's reader reject the record
  tb_readback.py killed METRICS DIR    a killed run: TensorBoard lacks at most the last interval

Every record's two CRCs are also checked with the CRC-32C below, written from the definition
(reflected polynomial 0x82f63b78), independent of dltrain's and of tensorboard's. Exit 0 or 1,
saying why on stdout."""
import glob
import json
import math
import os
import shutil
import struct
import sys

from tensorboard.backend.event_processing import event_accumulator
from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader
from tensorboard.compat import tf
from tensorboard.compat.proto import event_pb2

# metrics key -> TensorBoard tag, and the metrics file's printed precision (absolute)
TRAIN = {"loss": ("train/loss", 5e-7), "top1": ("train/top1", 5e-6), "lr": ("train/lr", 0),
         "images_per_s": ("train/images_per_s", 5e-4), "data_wait": ("train/data_wait", 5e-6),
         "wait": ("train/wait", 5e-6)}
VAL = {"val_top1": "val/top1", "val_top5": "val/top5", "val_nonfinite": "val/nonfinite"}


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def records(path):
    """The file's records by the framing itself; raises on a bad CRC or a torn record."""
    out, buf, off = [], open(path, "rb").read(), 0
    while off < len(buf):
        if off + 12 > len(buf):
            raise ValueError("torn header at byte %d" % off)
        (n,) = struct.unpack_from("<Q", buf, off)
        (hcrc,) = struct.unpack_from("<I", buf, off + 8)
        if hcrc != masked(buf[off:off + 8]):
            raise ValueError("length CRC wrong at byte %d" % off)
        data = buf[off + 12:off + 12 + n]
        if len(data) != n or off + 16 + n > len(buf):
            raise ValueError("torn record at byte %d" % off)
        (dcrc,) = struct.unpack_from("<I", buf, off + 12 + n)
        if dcrc != masked(data):
            raise ValueError("data CRC wrong at byte %d" % off)
        out.append((off, data))
        off += 16 + n
    return out


def one_file(d):
    files = glob.glob(os.path.join(d, "events.out.tfevents.*"))
    if len(files) != 1:
        sys.exit(print("expected one event file in %s, found %s" % (d, files)) or 1)
    return files[0]


def scalars(path):
    """{(tag, step): value} read by tensorboard's own loader; also the first event."""
    events = [event_pb2.Event.FromString(r) for r in RawEventFileLoader(path).Load()]
    first, got = events[0], {}
    for e in events[1:]:
        for v in e.summary.value:
            if v.WhichOneof("value") != "simple_value" or (v.tag, e.step) in got:
                sys.exit(print("unexpected or repeated value %s at step %d" % (v, e.step)) or 1)
            got[(v.tag, e.step)] = v.simple_value
    return first, events, got


def expected(metrics):
    want = {}
    for line in open(metrics):
        o = json.loads(line)
        if "step" in o and "loss" in o:
            for k, (tag, _) in TRAIN.items():
                want[(tag, o["step"])] = (o[k], k)
        elif o.get("key") == "eval_accuracy":
            m = o["metadata"]
            for k, tag in VAL.items():
                want[(tag, m["step_num"])] = (m[k], k)
    return want


def close(got, want, key):
    tol = TRAIN[key][1] if key in TRAIN else 5e-7
    # float32 holds ~7 digits; the metrics file's %.6g/%.6f/%.3f rounding on top
    return math.isclose(got, want, rel_tol=2e-6, abs_tol=tol + 1e-7)


def compare(metrics, d):
    path = one_file(d)
    recs = records(path)  # independent CRC check of every record
    first, events, got = scalars(path)
    if first.file_version != "brain.Event:2" or first.wall_time <= 0 or len(events) != len(recs):
        return print("first event %r, %d events for %d records" % (first, len(events), len(recs))) or 1
    want = expected(metrics)
    if not want or set(got) != set(want):
        return print("tags/steps differ: only in TensorBoard %s, only in metrics %s" %
                     (sorted(set(got) - set(want))[:5], sorted(set(want) - set(got))[:5])) or 1
    bad = [(k, got[k], want[k][0]) for k in want if not close(got[k], want[k][0], want[k][1])]
    if bad:
        return print("values differ (tag, step), tensorboard, metrics: %s" % bad[:5]) or 1
    # what the TensorBoard application itself loads from the directory
    acc = event_accumulator.EventAccumulator(d, size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    tags = sorted(acc.Tags()["scalars"])
    n = sum(len(acc.Scalars(t)) for t in tags)
    if tags != sorted({t for t, _ in want}) or n != len(want):
        return print("EventAccumulator sees tags %s, %d scalars (want %d)" % (tags, n, len(want))) or 1
    steps = sorted({s for _, s in want})
    print("%d records, CRCs valid; %d scalars under %d tags at steps %s equal to the metrics file" %
          (len(recs), len(want), len(tags), steps))
    return 0


def reader_count(path):
    """Records tensorboard's RawEventFileLoader yields (it stops at a record it rejects), and the
    error its record reader raises there."""
    n = sum(1 for _ in RawEventFileLoader(path).Load())
    err = None
    try:
        if tf.__version__ == "stub":  # tensorboard's own reader (no TensorFlow installed)
            reader = tf.pywrap_tensorflow.PyRecordReader_New(path.encode(), 0, b"", None)
            while True:
                reader.GetNext()
        else:
            for _ in tf.compat.v1.io.tf_record_iterator(path):
                pass
    except tf.errors.OutOfRangeError:
        pass
    except tf.errors.DataLossError as e:
        err = str(e)
    return n, err


def damage(d, work):
    path = one_file(d)
    recs = records(path)
    good, err = reader_count(path)
    if good != len(recs) or err:
        return print("undamaged file: %d of %d records read (%s)" % (good, len(recs), err)) or 1
    k = len(recs) // 2
    off, data = recs[k]
    cases = [("a byte of record %d's data" % k, off + 12 + len(data) // 2, "event crc32"),
             ("a byte of record %d's length" % k, off + 1, "header crc32"),
             ("a byte of record %d's data CRC" % k, off + 12 + len(data) + 1, "event crc32")]
    for what, at, why in cases:
        bad = os.path.join(work, "events.out.tfevents.damaged")
        shutil.copyfile(path, bad)
        with open(bad, "r+b") as f:
            f.seek(at)
            b = f.read(1)
            f.seek(at)
            f.write(bytes([b[0] ^ 0x10]))
        n, err = reader_count(bad)
        try:
            records(bad)
            mine = None
        except ValueError as e:
            mine = str(e)
        if n != k or not err or why not in err or not mine:
            return print("%s flipped: tensorboard read %d records (want the %d before it), error %r, own check %r" %
                         (what, n, k, err, mine)) or 1
        print("%s flipped: tensorboard's reader stops there (%s); own CRC-32C: %s" % (what, err.strip(), mine))
    return 0


def killed(metrics, d):
    path = one_file(d)
    recs = records(path)  # a kill never leaves a torn record: each interval is one append
    _, _, got = scalars(path)
    want = expected(metrics)
    steps = sorted({s for _, s in want})
    tb_steps = {s for _, s in got}
    missing = [s for s in steps if s not in tb_steps]
    if len(steps) < 3 or missing not in ([], steps[-1:]) or any(k not in want for k in got if k[1] in steps):
        return print("killed run: metrics steps %s, TensorBoard steps %s" % (steps, sorted(tb_steps))) or 1
    for k in got:
        if k in want and not close(got[k], want[k][0], want[k][1]):
            return print("killed run: %s differs" % (k,)) or 1
    print("killed run: %d records all valid; TensorBoard has %d of the metrics file's %d intervals" %
          (len(recs), len(steps) - len(missing), len(steps)))
    return 0


if __name__ == "__main__":
    cmd = sys.argv[1]
    sys.exit({"compare": lambda: compare(sys.argv[2], sys.argv[3]),
              "damage": lambda: damage(sys.argv[2], sys.argv[3]),
              "killed": lambda: killed(sys.argv[2], sys.argv[3])}[cmd]())

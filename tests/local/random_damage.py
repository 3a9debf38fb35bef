#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""random_damage: seeded random damage to image folders, RecordIO files, labels files, validation
class folders and checkpoints, each fed to a short real dltrain run. Every run must end in a clear
error (nonzero exit and a `dltrain` message) or a correct result: never a signal, never a hang
(30 s bound), never NaN/inf printed as a result, never a damaged checkpoint accepted (eval,
--verify, --resume) or a requeue that starts over silently, never a RecordIO pair whose index does
not match its record file (checked here by a reader of its own), never a validation class scored
that the checkpoint does not name (an unknown name, 1-based numbers), and every present image named
by a labels file scored once.

usage: random_damage.py --dltrain BIN --mkjpegs BIN --work DIR [--seed S] [--runs N] [--seconds T]
                        [--only I] [--srun "srun ..."]
                        [--kinds folder,recordio,checkpoint,labels,valclasses,options]
                        [--no-strict]
Run I uses the generator seeded with (S, I): `--only I` repeats that one run alone.
"""
import argparse
import hashlib
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import time

TINY = ["--arch", "resnet18", "--width", "0.25", "--image-size", "32", "--workers", "1", "--log-every", "1"]
NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
BAD_NUMBER = re.compile(r"\b(?:-?nan|-?inf(?:inity)?)\b", re.I)


def sh(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


def md5(path):
    return hashlib.md5(open(path, "rb").read()).hexdigest() if os.path.exists(path) else None


# ------------------------------------------------------------------ damage to one file's bytes
def damage_bytes(rng, data, header_len=None):
    """A random change that really changes the bytes (or the length)."""
    n = len(data)
    kind = rng.choice(["truncate", "overwrite", "flip", "garbage", "prepend", "append", "zero", "header"])
    if kind == "header" and header_len:
        pos = rng.randrange(0, min(n, header_len)) if n else 0
        out = bytearray(data)
        if n:
            out[pos] = (out[pos] + rng.randrange(1, 256)) % 256
        return bytes(out), "header byte %d" % pos
    if kind == "truncate" and n:
        cut = rng.randrange(0, n)
        return data[:cut], "truncated to %d of %d" % (cut, n)
    if kind == "overwrite" and n:
        out = bytearray(data)
        k = rng.randrange(1, 65)
        pos = rng.randrange(0, n)
        for i in range(pos, min(n, pos + k)):
            out[i] = rng.randrange(256)
        if bytes(out) == data:
            out[pos] ^= 0xFF
        return bytes(out), "%d bytes overwritten at %d" % (k, pos)
    if kind == "flip" and n:
        out = bytearray(data)
        pos = rng.randrange(0, n)
        out[pos] ^= 1 << rng.randrange(8)
        return bytes(out), "bit flipped at %d" % pos
    if kind == "prepend":
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64))) + data, "garbage prepended"
    if kind == "append":
        return data + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64))), "garbage appended"
    if kind == "zero" and n:
        pos = rng.randrange(0, n)
        k = rng.randrange(1, 4097)
        out = bytearray(data)
        out[pos:pos + k] = bytes(len(out[pos:pos + k]))
        if bytes(out) == data:
            return data[:pos], "truncated to %d" % pos
        return bytes(out), "%d bytes zeroed at %d" % (k, pos)
    return bytes(rng.randrange(256) for _ in range(rng.randrange(0, 2048))), "replaced by garbage"


def jpeg_huge_dims(data):
    """A valid JPEG whose frame header claims a 60000 x 60000 image."""
    out = bytearray(data)
    for i in range(len(out) - 9):
        if out[i] == 0xFF and out[i + 1] in (0xC0, 0xC1, 0xC2):
            out[i + 5:i + 7] = (60000).to_bytes(2, "big")
            out[i + 7:i + 9] = (60000).to_bytes(2, "big")
            return bytes(out)
    return bytes(out)


# ------------------------------------------------------------------ scenarios
class Ctx:
    def __init__(self, args):
        self.a = args
        self.base = os.path.join(args.work, "base")


def prepare(ctx):
    a = ctx.a
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    r = sh([a.mkjpegs, "folder", ctx.base, "3", "6", "40", "40", "plain"])
    if r.returncode:
        sys.exit("mkjpegs failed: " + r.stdout)
    r = sh([a.dltrain, "data", "pack", os.path.join(ctx.base, "train"), os.path.join(a.work, "base.rec"), "--force"])
    if r.returncode:
        sys.exit("data pack failed: " + r.stdout)
    ck = os.path.join(a.work, "ck")
    r = sh([a.dltrain, "train", "--synthetic", *TINY, "--classes", "3", "--batch", "4", "--synthetic-size", "16",
            "--epochs", "2", "--checkpoint-dir", ck, "--checkpoint-every", "4"])
    if r.returncode or not os.path.exists(os.path.join(ck, "ckpt-00000008.safetensors")):
        sys.exit("checkpoint setup failed: " + r.stdout)
    ctx.ck = ck
    if {"valclasses", "labels"} & set(a.kinds.split(",")):  # a checkpoint of the base folder: it names the classes
        ckd = os.path.join(a.work, "ckd")
        r = sh([a.dltrain, "train", "--data", ctx.base, *TINY, "--batch", "4", "--steps", "2",
                "--eval-every", "0", "--checkpoint-dir", ckd])
        found = sorted(f for f in os.listdir(ckd) if f.endswith(".safetensors") and ".state." not in f) \
            if os.path.isdir(ckd) else []
        if r.returncode or not found:
            sys.exit("checkpoint setup (data) failed: " + r.stdout)
        ctx.ck_data = os.path.join(ckd, found[-1])


def folder_case(ctx, rng, d):
    """A copy of the image folder with 1-4 damages; train or eval on it."""
    root = os.path.join(d, "ds")
    shutil.copytree(ctx.base, root)
    split = rng.choice(["train", "val"])
    classes = sorted(os.listdir(os.path.join(root, split)))
    notes = []
    for _ in range(rng.randrange(1, 5)):
        c = rng.choice(classes)
        cdir = os.path.join(root, split, c)
        files = sorted(f for f in os.listdir(cdir) if f.startswith("img_") and f.endswith(".JPEG"))
        op = rng.choice(["file", "file", "file", "huge", "empty_class", "new_empty_class", "zero_file", "dir_named_jpeg",
                         "dangling_link", "not_image", "all_bad"])
        if op == "file" and files:
            f = os.path.join(cdir, rng.choice(files))
            data, how = damage_bytes(rng, open(f, "rb").read())
            open(f, "wb").write(data)
            notes.append("%s: %s" % (os.path.relpath(f, root), how))
        elif op == "huge" and files:
            f = os.path.join(cdir, rng.choice(files))
            open(f, "wb").write(jpeg_huge_dims(open(f, "rb").read()))
            notes.append("%s: 60000x60000 in its header" % os.path.relpath(f, root))
        elif op == "empty_class":
            for f in files:
                os.unlink(os.path.join(cdir, f))
            notes.append("%s/%s emptied" % (split, c))
        elif op == "new_empty_class":
            os.makedirs(os.path.join(root, split, "zz_empty"), exist_ok=True)
            notes.append("%s/zz_empty added" % split)
        elif op == "zero_file":
            open(os.path.join(cdir, "zero.JPEG"), "wb").close()
            notes.append("%s/%s/zero.JPEG empty" % (split, c))
        elif op == "dir_named_jpeg":
            os.makedirs(os.path.join(cdir, "adir.JPEG"), exist_ok=True)
            notes.append("directory named .JPEG")
        elif op == "dangling_link":
            if not os.path.lexists(os.path.join(cdir, "link.JPEG")):
                os.symlink("/nonexistent/x.JPEG", os.path.join(cdir, "link.JPEG"))
            notes.append("dangling symlink")
        elif op == "not_image":
            open(os.path.join(cdir, "notes.jpg"), "w").write("this is text")
            notes.append("text file named .jpg")
        elif op == "all_bad":
            for f in files:
                open(os.path.join(cdir, f), "wb").write(b"\xff\xd8garbage")
            notes.append("%s/%s: every file bad" % (split, c))
    batch = rng.choice([1, 2, 3, 4, 4, 8, 8, 32])
    strict = rng.random() < 0.2 and not ctx.a.no_strict
    if split == "train" or rng.random() < 0.3:
        cmd = ["train", "--data", root, *TINY, "--batch", str(batch), "--steps", str(rng.randrange(1, 4)),
               "--epochs", "2"]
        expect = "train"
    else:
        cmd = ["eval", "--data", root, *TINY, "--batch", str(batch), "--checkpoint",
               os.path.join(ctx.ck, "ckpt-00000008.safetensors")]
        expect = "eval"
    if strict:
        cmd.append("--strict")
    return cmd, expect, "folder: " + "; ".join(notes) + (" --strict" if strict else ""), {}


def recordio_case(ctx, rng, d):
    rec, idx = os.path.join(d, "x.rec"), os.path.join(d, "x.idx")
    shutil.copy(os.path.join(ctx.a.work, "base.rec"), rec)
    shutil.copy(os.path.join(ctx.a.work, "base.idx"), idx)
    notes = []
    for _ in range(rng.randrange(1, 4)):
        target = rng.choice(["rec", "rec", "idx"])
        if target == "rec":
            data, how = damage_bytes(rng, open(rec, "rb").read(), header_len=32)
            open(rec, "wb").write(data)
            notes.append("rec " + how)
        else:
            if not os.path.exists(idx):
                continue
            lines = open(idx, "rb").read().decode("latin-1").splitlines()
            op = rng.choice(["bytes", "offset_beyond", "garbage_line", "drop", "dup", "empty", "negative", "remove"])
            if op == "bytes":
                data, how = damage_bytes(rng, "\n".join(lines).encode("latin-1"))
                open(idx, "wb").write(data)
                notes.append("idx " + how)
                continue
            if op == "offset_beyond" and lines:
                i = rng.randrange(len(lines))
                lines[i] = "%d\t%d" % (i, os.path.getsize(rec) + rng.randrange(0, 10 ** 9))
            elif op == "garbage_line":
                lines.insert(rng.randrange(len(lines) + 1), "abc\tdef")
            elif op == "drop" and lines:
                del lines[rng.randrange(len(lines)):]
            elif op == "dup" and lines:
                lines += lines[: rng.randrange(1, len(lines) + 1)]
            elif op == "empty":
                lines = []
            elif op == "negative" and lines:
                lines[rng.randrange(len(lines))] = "0\t-8"
            elif op == "remove":
                os.unlink(idx)
                notes.append("idx removed")
                continue
            open(idx, "wb").write(("\n".join(lines) + ("\n" if lines else "")).encode("latin-1"))
            notes.append("idx " + op)
    batch = rng.choice([1, 2, 4, 4, 8, 8, 32])
    cmd = ["train", "--data", rec, *TINY, "--batch", str(batch), "--steps", str(rng.randrange(1, 4)), "--epochs", "2"]
    if rng.random() < 0.2 and not ctx.a.no_strict:
        cmd.append("--strict")
    return cmd, "train", "recordio: " + "; ".join(notes), {"recordio_must_fail": recordio_pair_damaged(rec, idx)}


def recordio_pair_damaged(rec, idx):
    """The oracle for a .rec/.idx pair, written apart from dltrain's reader: True when the index is not
    all "KEY<TAB>OFFSET" lines ending in a newline with strictly increasing offsets, each at a record
    (the magic, a length inside the file, an image header with a whole-number label)."""
    if not os.path.exists(idx) or not os.path.exists(rec):
        return True
    data, text = open(rec, "rb").read(), open(idx, "rb").read()
    if not text or not text.endswith(b"\n"):
        return True
    nxt, last_whole = 0, False
    for line in text.split(b"\n")[:-1]:
        m = re.fullmatch(rb"(\d{1,19})[\t ]+(\d{1,19})\r?", line)
        if not m:
            return True
        off = int(m.group(2))
        if off < nxt or off + 8 > len(data):
            return True
        magic, lrec = struct.unpack_from("<II", data, off)
        plen, cflag = lrec & ((1 << 29) - 1), lrec >> 29
        if magic != 0xCED7230A or off + 8 + plen > len(data) or cflag not in (0, 1) or plen < 16:
            return True
        flag, label = struct.unpack_from("<If", data, off + 8)
        if flag > 0:
            if flag > 1024 or plen < 28:
                return True
            label = struct.unpack_from("<f", data, off + 8 + 24)[0]
        if not (0 <= label < 1e6) or label != int(label):
            return True
        nxt = off + 8 + ((plen + 3) & ~3)
        last_whole = cflag == 0
    # a whole last record ends the file: bytes after it are records a cut index does not list
    if nxt and last_whole and nxt < len(data):
        return True
    return False


def checkpoint_case(ctx, rng, d):
    """A checkpoint directory (step 4 valid unless chosen otherwise, step 8 damaged) and one command."""
    ck = os.path.join(d, "ck")
    shutil.copytree(ctx.ck, ck)
    model8, state8 = os.path.join(ck, "ckpt-00000008.safetensors"), os.path.join(ck, "ckpt-00000008.state.safetensors")
    keep_older = rng.random() < 0.4
    if not keep_older:
        for f in os.listdir(ck):
            if f.startswith("ckpt-00000004"):
                os.unlink(os.path.join(ck, f))
    orig = {model8: md5(model8), state8: md5(state8)}
    which = rng.choice(["model", "model", "state", "both", "state_missing", "mixed", "model_empty"])
    notes = []
    for path, name in ((model8, "model"), (state8, "state")):
        if which in (name, "both"):
            raw = open(path, "rb").read()
            hlen = int.from_bytes(raw[:8], "little") + 8 if len(raw) >= 8 else 8
            data, how = damage_bytes(rng, raw, header_len=hlen)
            if rng.random() < 0.1:  # the header length field itself
                data = (rng.choice([0, 7, 2 ** 63, 2 ** 64 - 1, len(raw)])).to_bytes(8, "little") + raw[8:]
                how = "header length field"
            open(path, "wb").write(data)
            notes.append("%s %s" % (name, how))
    if which == "state_missing":
        os.unlink(state8)
        notes.append("state file removed")
    if which == "mixed":  # the state file of another checkpoint beside this model file
        src = os.path.join(ctx.ck, "ckpt-00000004.state.safetensors")
        shutil.copy(src, state8)
        notes.append("state file of step 4")
    if which == "model_empty":
        open(model8, "wb").close()
        notes.append("model file empty")
    damaged = md5(model8) != orig[model8] or (os.path.exists(state8) and md5(state8) != orig[state8])
    op = rng.choice(["eval", "eval", "verify_info", "verify_eval", "resume_auto", "resume_auto", "resume_path",
                     "resume_fresh"])
    syn = ["--synthetic", *TINY, "--classes", "3", "--batch", "4"]
    info = {"damaged": damaged, "state_missing": which == "state_missing", "keep_older": keep_older, "op": op}
    if op == "eval":
        cmd = ["eval", *syn, "--eval-size", "16", "--checkpoint", model8]
    elif op == "verify_info":
        cmd = ["info", "--checkpoint", model8, "--verify"]
    elif op == "verify_eval":
        cmd = ["eval", "--checkpoint", model8, "--verify"]
    elif op == "resume_path":
        cmd = ["train", *syn, "--synthetic-size", "16", "--epochs", "3", "--resume", model8, "--checkpoint-dir", ck,
               "--resume-override", "ranks"]
    else:
        cmd = ["train", *syn, "--synthetic-size", "16", "--epochs", "3", "--checkpoint-dir", ck,
               "--resume", "auto-or-fresh" if op == "resume_fresh" else "auto", "--resume-override", "ranks"]
    # (the checkpoints are a single rank's: --resume-override ranks lets the runs under srun resume them)
    return cmd, "checkpoint", "checkpoint: %s (older valid one %s)" % ("; ".join(notes), "kept" if keep_older else
                                                                       "removed"), info


def labels_case(ctx, rng, d):
    """The validation images as one flat folder with a damaged "FILENAME CLASS" labels file."""
    flat, labels = os.path.join(d, "flat"), os.path.join(d, "labels.txt")
    os.makedirs(flat)
    lines = []
    for c in sorted(os.listdir(os.path.join(ctx.base, "val"))):
        for f in sorted(os.listdir(os.path.join(ctx.base, "val", c))):
            shutil.copy(os.path.join(ctx.base, "val", c, f), os.path.join(flat, c + "_" + f))
            lines.append("%s_%s %s" % (c, f, c))
    notes = []
    for _ in range(rng.randrange(1, 4)):
        op = rng.choice(["missing_file", "unknown_class", "garbage", "long_line", "one_field", "bytes", "empty",
                         "dup", "path_escape", "one_based", "zero_based", "unlisted"])
        if op in ("one_based", "zero_based"):  # classes as numbers: c00 -> 1 (or 0), c01 -> 2 (or 1), ...
            shift = 1 if op == "one_based" else 0
            lines = ["%s %d" % (l.split()[0], int(l.split()[1][1:]) + shift)
                     if len(l.split()) == 2 and re.fullmatch(r"c\d\d", l.split()[1]) else l for l in lines]
        elif op == "unlisted" and lines:  # an image of the folder without a line
            del lines[rng.randrange(len(lines))]
        elif op == "missing_file" and lines:
            lines[rng.randrange(len(lines))] = "nothere.JPEG c00"
        elif op == "unknown_class" and lines:
            i = rng.randrange(len(lines))
            lines[i] = lines[i].split()[0] + " zz_new_class"
        elif op == "garbage":
            lines.insert(rng.randrange(len(lines) + 1), "".join(chr(rng.randrange(33, 127)) for _ in range(40)))
        elif op == "long_line":
            lines.insert(rng.randrange(len(lines) + 1), "x" * rng.randrange(1000, 5000) + " c00")
        elif op == "one_field" and lines:
            i = rng.randrange(len(lines))
            lines[i] = lines[i].split()[0]
        elif op == "empty":
            lines = []
        elif op == "dup" and lines:
            lines += lines[: rng.randrange(1, len(lines) + 1)]
        elif op == "path_escape" and lines:
            lines[rng.randrange(len(lines))] = "../../../../etc/passwd c00"
        elif op == "bytes":
            data, how = damage_bytes(rng, ("\n".join(lines) + "\n").encode())
            lines = data.decode("latin-1").split("\n")
            notes.append("labels " + how)
            continue
        notes.append("labels " + op)
    open(labels, "wb").write(("\n".join(lines) + "\n").encode("latin-1"))
    cmd = ["eval", "--data", ctx.base, "--val-data", flat, "--val-labels", labels, *TINY,
           "--batch", str(rng.choice([1, 3, 4, 8, 32])), "--checkpoint", ctx.ck_data]
    # The oracle: a line that is not blank, a comment or exactly "FILENAME CLASS", an overlong line or a
    # file named twice must be refused (accepting it drops or doubles images without a word).
    names, must_fail = [], False
    for raw in open(labels, "rb").read().split(b"\n"):
        f = raw.split()
        if len(raw) > 1000:
            must_fail = True
        elif f and not f[0].startswith(b"#"):
            must_fail |= len(f) != 2
            names.append(f[0])
    must_fail |= len(names) != len(set(names))
    # Classes: a name of the training classes, or a position 0..2; anything else (an unknown name,
    # numbers running 1..3) must be refused, never scored against the wrong class.
    train_classes = sorted(os.listdir(os.path.join(ctx.base, "train")))
    scored = 0
    for raw in open(labels, "rb").read().split(b"\n"):
        f = raw.split()
        if len(f) == 2 and not f[0].startswith(b"#"):
            c = f[1].decode("latin-1")
            if c not in train_classes and not (re.fullmatch(r"0|[1-9]\d*", c) and int(c) < len(train_classes)):
                must_fail = True
            if os.path.isfile(os.path.join(flat, f[0].decode("latin-1"))):
                scored += 1  # a line naming a missing file is left out, never replaced by another image
    return cmd, "eval", "flat val: " + "; ".join(notes), {"labels_must_fail": must_fail, "eval_images": scored}


def valclasses_case(ctx, rng, d):
    """Validation class folders renamed, swapped, removed or added: matched by name to the classes
    of the checkpoint (trained on the base folder), a subset allowed, an unknown name refused."""
    val = os.path.join(d, "val")
    shutil.copytree(os.path.join(ctx.base, "val"), val)
    notes, must_fail = [], False
    for _ in range(rng.randrange(1, 3)):
        classes = sorted(os.listdir(val))
        op = rng.choice(["remove", "swap", "unknown", "numbered"])
        if op == "remove" and len(classes) > 1:
            shutil.rmtree(os.path.join(val, rng.choice(classes)))
        elif op == "swap" and len(classes) > 1:
            a, b = rng.sample(classes, 2)
            os.rename(os.path.join(val, a), os.path.join(val, "tmp_swap"))
            os.rename(os.path.join(val, b), os.path.join(val, a))
            os.rename(os.path.join(val, "tmp_swap"), os.path.join(val, b))
        elif op == "unknown" and "zz_unknown" not in classes:
            os.rename(os.path.join(val, rng.choice(classes)), os.path.join(val, "zz_unknown"))
        elif op == "numbered":  # folders named by number: names, never positions
            c = rng.choice([c for c in classes if re.fullmatch(r"c\d\d", c)] or [None])
            if c and not os.path.exists(os.path.join(val, str(int(c[1:])))):
                os.rename(os.path.join(val, c), os.path.join(val, str(int(c[1:]))))
        notes.append(op)
    train_classes = sorted(os.listdir(os.path.join(ctx.base, "train")))
    left = sorted(os.listdir(val))
    must_fail = any(c not in train_classes for c in left)
    images = sum(len(os.listdir(os.path.join(val, c))) for c in left)
    cmd = ["eval", "--data", ctx.base, "--val-data", val, *TINY, "--batch", str(rng.choice([1, 3, 4, 8])),
           "--checkpoint", ctx.ck_data]
    return cmd, "eval", "val classes: " + ", ".join(notes), {"classes_must_fail": must_fail,
                                                           "eval_images": None if must_fail else images}


OPTION_VALUES = ["nan", "-nan", "inf", "-inf", "1e999", "1e-999", "", "abc", "0x10", "1.5", "-1", "0", "3", "0.5",
                 "1e3", "99999999999999999999", "2,3"]
OPTIONS = ["lr", "momentum", "wd", "label-smoothing", "warmup-epochs", "checkpoint-minutes", "stall-timeout",
           "loss-scale", "bucket-mib", "bottom-bucket-mib", "timeout", "log-every", "check-every", "max-bad-steps", "seed", "milestones",
           "loss-scale-window", "workers"]


def options_case(ctx, rng, d):
    """A short synthetic run with 1-3 options given random (mostly bad) values."""
    cmdname = rng.choice(["train", "train", "eval", "bench"])
    cmd = [cmdname, "--synthetic", *TINY, "--classes", "3", "--batch", "4"]
    if cmdname == "train":
        cmd += ["--synthetic-size", "16", "--steps", "2", "--checkpoint-dir", os.path.join(d, "ck")]
    elif cmdname == "eval":
        cmd += ["--eval-size", "16", "--checkpoint", os.path.join(ctx.ck, "ckpt-00000008.safetensors")]
    else:
        cmd += ["--iters", "1", "--warmup", "0"]
    notes = []
    for _ in range(rng.randrange(1, 4)):
        o, v = rng.choice(OPTIONS), rng.choice(OPTION_VALUES)
        if rng.random() < 0.5:
            cmd += ["--" + o, v]
        else:
            cmd.append("--%s=%s" % (o, v))
        notes.append("--%s %r" % (o, v))
    return cmd, cmdname, "options: " + " ".join(notes), {}


# ------------------------------------------------------------------ judging one run
def judge(out, rc, expect, info):
    """None when the run is acceptable, else why not."""
    if rc == 124 or rc == 137:
        return "hang (no end within 30 s)"
    if rc < 0 or rc >= 128:
        return "killed by a signal (status %d)" % rc
    results = [l for l in out.splitlines() if re.match(r"dltrain: (eval |epoch |bench |done|summary)", l)]
    said = re.search(r"loss is (?:-?nan|-?inf)|loss not finite", out)
    for l in results:
        if BAD_NUMBER.search(l) and not (said and l.startswith("dltrain: epoch ")):
            return "NaN/inf printed as a result: " + l
    if rc != 0:
        if not re.search(r"^dltrain[: ]", out, re.M):
            return "nonzero exit (%d) without a dltrain message" % rc
    if expect == "eval" and rc == 0:
        m = re.search(r"dltrain: eval .*: (\d+) images, top-1 (%s), top-5 (%s)" % (NUMBER, NUMBER), out)
        if not m or int(m.group(1)) < 1 or not (0 <= float(m.group(2)) <= 1 and 0 <= float(m.group(3)) <= 1):
            return "eval succeeded without a sane result line"
    if info.get("labels_must_fail") and rc == 0:
        return ("a labels file with a malformed or repeated line, an unknown class or 1-based class numbers "
                "was accepted (images silently dropped, doubled or scored against the wrong class)")
    if info.get("classes_must_fail") and rc == 0:
        return "a validation class that is not among the trained classes was scored"
    if info.get("recordio_must_fail") and rc == 0:
        return "a damaged RecordIO pair (index against record file) was accepted"
    if expect == "eval" and rc == 0 and info.get("eval_images") is not None:
        m = re.search(r"dltrain: eval .*: (\d+) images, top-1", out)
        if m and int(m.group(1)) != info["eval_images"]:
            return "eval scored %s images, not the %d present and named once each" % (m.group(1), info["eval_images"])
    if expect == "checkpoint":
        op, damaged = info["op"], info["damaged"]
        if op in ("verify_info", "verify_eval"):
            if rc == 0 and (damaged or info["state_missing"]):
                return "--verify passed a damaged or unverifiable pair"
        elif op == "eval":
            if rc == 0 and damaged:
                return "eval scored a damaged checkpoint"
            if rc == 0 and info["state_missing"] and "unverified" not in out:
                return "eval of a model file without its state file did not say 'unverified'"
        elif op == "resume_path":
            if rc == 0 and (damaged or info["state_missing"]):
                return "--resume PATH accepted a damaged or incomplete pair"
        elif op in ("resume_auto", "resume_fresh"):
            bad8 = damaged or info["state_missing"]
            resumed8 = "resumed from" in out and "ckpt-00000008" in out.split("resumed from", 1)[1].splitlines()[0]
            if bad8 and resumed8:
                return "--resume picked the damaged checkpoint"
            if op == "resume_auto" and bad8 and not info["keep_older"] and rc == 0:
                return "--resume auto started over although the only checkpoint was damaged"
            if info["keep_older"] and bad8 and rc == 0 and "resumed from" not in out:
                return "--resume did not take the valid older checkpoint"
            if "no checkpoint in" in out:
                return "said 'no checkpoint' although checkpoints exist"
    return None


def run_bounded(argv, env, cwd, limit):
    """Runs argv for at most limit seconds: (output, status, negative for a signal, 124 on a hang). A
    hung dltrain is shown with its threads' stacks (gdb, when installed) before it is killed."""
    pr = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                          env=env, cwd=cwd, start_new_session=True)
    try:
        out, _ = pr.communicate(timeout=limit)
        return out, pr.returncode
    except subprocess.TimeoutExpired:
        stacks = ""
        if shutil.which("gdb"):
            pids = sh(["pgrep", "-s", str(pr.pid), "-x", "dltrain"]).stdout.split() or [str(pr.pid)]
            for pid in pids[:2]:
                g = sh(["timeout", "20", "gdb", "-batch", "-p", pid, "-ex", "thread apply all bt 12"])
                stacks += "\n".join(l for l in g.stdout.splitlines() if l.startswith(("#", "Thread")))[-3000:]
        try:
            os.killpg(pr.pid, 9)
        except OSError:
            pass
        out, _ = pr.communicate()
        return out + "\n[hung; stacks:]\n" + stacks, 124


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dltrain", required=True)
    p.add_argument("--mkjpegs", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--runs", type=int, default=300)
    p.add_argument("--seconds", type=float, default=180)
    p.add_argument("--only", type=int, default=None)
    p.add_argument("--srun", default="")
    p.add_argument("--kinds", default="folder,recordio,checkpoint,labels,valclasses,options")
    p.add_argument("--no-strict", action="store_true",
                   help="never --strict (across ranks a --strict stop still waits for the stall watchdog)")
    a = p.parse_args()
    ctx = Ctx(a)
    prepare(ctx)
    kinds = {"folder": folder_case, "recordio": recordio_case, "checkpoint": checkpoint_case, "labels": labels_case,
             "valclasses": valclasses_case, "options": options_case}
    use = [kinds[k] for k in a.kinds.split(",")]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    counts = {"runs": 0, "errors": 0, "successes": 0, "bad": 0}
    failures = []
    t0 = time.time()
    indices = [a.only] if a.only is not None else range(a.runs)
    for i in indices:
        if a.only is None and time.time() - t0 > a.seconds:
            break
        rng = random.Random("%d/%d" % (a.seed, i))
        d = os.path.join(a.work, "run%d" % i)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        cmd, expect, what, info = rng.choice(use)(ctx, rng, d)
        full = (a.srun.split() if a.srun else []) + [a.dltrain] + cmd
        # line-buffered stdout (a hung run still shows how far it got); stdbuf works by LD_PRELOAD,
        # which an ASan-built dltrain refuses (its runtime must load first)
        if shutil.which("stdbuf") and not os.environ.get("DLT_SANITIZED"):
            full = ["stdbuf", "-oL"] + full
        out, rc = run_bounded(full, env, d, 30)
        why = judge(out, rc, expect, info)
        counts["runs"] += 1
        if why:
            counts["bad"] += 1
            failures.append((i, why, what, " ".join(cmd), out[-5000:]))
        elif rc == 0:
            counts["successes"] += 1
        else:
            counts["errors"] += 1
        if why is None and a.only is None:
            shutil.rmtree(d, ignore_errors=True)
        if a.only is not None:
            print("# run %d: %s\n# %s\n# rc %d\n%s" % (i, what, " ".join(cmd), rc, out))
    el = time.time() - t0
    print("# random damage: seed %d, %d runs in %.0f s: %d clean errors, %d successes, %d violations"
          % (a.seed, counts["runs"], el, counts["errors"], counts["successes"], counts["bad"]))
    for i, why, what, cmd, out in failures[:20]:
        print("# VIOLATION run %d (repeat: --seed %d --only %d): %s\n#   damage: %s\n#   dltrain %s" % (
            i, a.seed, i, why, what, cmd))
        for l in out.splitlines()[-(60 if why.startswith("hang") else 6):]:
            print("#   | " + l)
    print("RESULT runs=%d errors=%d successes=%d violations=%d seconds=%.0f"
          % (counts["runs"], counts["errors"], counts["successes"], counts["bad"], el))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""make_photos.py OUT [COUNT] [--classes N] [--photos FILE,FILE...] [--jobs J]: ImageNet-sized JPEGs
made from real photographs.

The photographs are the two scikit-learn ships (sklearn.datasets.load_sample_images: china.jpg,
flower.jpg, 640x427), or the files --photos names (the GPU check carries those two in its pack:
tests/device/pack.sh). Each output is a seeded random crop of one of them (at least half its area,
aspect 4:3 or 3:4), rescaled to 500x375 or 375x500 as most ILSVRC-2012 images are, saved at quality
90 into OUT/train/<class>/NNNN.JPEG: an ImageFolder of real-photo content, not noise or gradients.
Without --classes there is one class per photograph, named after it; with --classes N the images
go round N folders n00000000 ... (ILSVRC's 1,000 classes: --classes 1000). --jobs J encodes in J
processes (the same files, whatever J). Needs Pillow (and scikit-learn without --photos).
"""
import argparse
import multiprocessing
import os
import random
import sys

from PIL import Image


def _photos(files):
    if files:
        return [Image.open(f).convert("RGB") for f in files], [os.path.splitext(os.path.basename(f))[0] for f in files]
    from sklearn.datasets import load_sample_images
    data = load_sample_images()
    return [Image.fromarray(a) for a in data.images], [os.path.splitext(os.path.basename(f))[0] for f in data.filenames]


def _one(job):
    """Image i: its photo, crop, size and flip drawn from a generator seeded by i alone."""
    i, out, folder, photo = job
    rng = random.Random(20261204 * 1000003 + i)
    src = _one.photos[photo]
    w, h = src.size
    portrait = rng.random() < 0.25
    aspect = 3 / 4 if portrait else 4 / 3
    area = w * h * rng.uniform(0.5, 1.0)
    cw = min(w, int(round((area * aspect) ** 0.5)))
    ch = min(h, int(round(cw / aspect)))
    cw = int(round(ch * aspect))
    x = rng.randint(0, w - cw)
    y = rng.randint(0, h - ch)
    img = src.crop((x, y, x + cw, y + ch)).resize((375, 500) if portrait else (500, 375), Image.LANCZOS)
    if rng.random() < 0.5:
        img = img.transpose(Image.FLIP_LEFT_RIGHT)
    img.save(os.path.join(out, "train", folder, "%04d.JPEG" % i), quality=90)


def _init(files):
    _one.photos = _photos(files)[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("count", nargs="?", type=int, default=128)
    ap.add_argument("--classes", type=int, default=0)
    ap.add_argument("--photos", default="")
    ap.add_argument("--jobs", type=int, default=1)
    a = ap.parse_args()
    files = [f for f in a.photos.split(",") if f]
    photos, names = _photos(files)
    folders = ["n%08d" % c for c in range(a.classes)] if a.classes > 0 else names
    for f in folders:
        os.makedirs(os.path.join(a.out, "train", f), exist_ok=True)
    jobs = [(i, a.out, folders[i % len(folders)], i % len(photos)) for i in range(a.count)]
    if a.jobs > 1:
        with multiprocessing.Pool(a.jobs, _init, (files,)) as pool:
            pool.map(_one, jobs, chunksize=max(1, a.count // (4 * a.jobs)))
    else:
        _one.photos = photos
        for j in jobs:
            _one(j)
    print("%d photos in %s/train, %d class folder(s)" % (a.count, a.out, len(folders)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

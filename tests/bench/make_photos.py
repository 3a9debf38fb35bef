#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""make_photos.py OUT [COUNT]: ImageNet-sized JPEGs made from real photographs.

The photographs are the two scikit-learn ships (sklearn.datasets.load_sample_images: china.jpg,
flower.jpg, 640x427). Each output is a seeded random crop of one of them (at least half its area,
aspect 4:3 or 3:4), rescaled to 500x375 or 375x500 as most ILSVRC-2012 images are, saved at quality
90 into OUT/train/<photo>/NNNN.JPEG: an ImageFolder of real-photo content, not noise or gradients.
"""
import os
import random
import sys

from PIL import Image
from sklearn.datasets import load_sample_images


def main():
    out = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 128
    rng = random.Random(20261204)
    data = load_sample_images()
    photos = [Image.fromarray(a) for a in data.images]
    names = [os.path.splitext(os.path.basename(f))[0] for f in data.filenames]
    for name in names:
        os.makedirs(os.path.join(out, "train", name), exist_ok=True)
    for i in range(count):
        k = i % len(photos)
        src = photos[k]
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
        img.save(os.path.join(out, "train", names[k], "%04d.JPEG" % i), quality=90)
    print("%d photos in %s/train" % (count, out))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""input_peers.py torchvision|dali DIR SECONDS: images/s of one peer's CPU training input path on one
core over the ImageFolder DIR/train: decode, RandomResizedCrop(224), random horizontal flip,
normalize; one JSON line. torchvision: PIL decode and the transforms of torchvision's ImageNet
recipe, no DataLoader workers. DALI: a CPU-only pipeline (device_id=None, one thread):
decoders.image_random_crop + resize + crop_mirror_normalize."""
import json
import sys
import time


def torchvision_rate(root, seconds):
    import torch
    import torchvision.transforms as T
    from torchvision.datasets import ImageFolder

    torch.set_num_threads(1)
    tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                    T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    ds = ImageFolder(root + "/train", transform=tf)
    for i in range(16):  # warm-up
        ds[i % len(ds)]
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        ds[n % len(ds)]
        n += 1
    return n / (time.perf_counter() - t0)


def dali_rate(root, seconds):
    from nvidia.dali import fn, pipeline_def, types

    batch = 32

    @pipeline_def(batch_size=batch, num_threads=1, device_id=None, seed=1)
    def pipe():
        jpegs, labels = fn.readers.file(file_root=root + "/train", random_shuffle=True, name="r")
        images = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB)
        images = fn.resize(images, resize_x=224, resize_y=224)
        images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW",
                                          mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
                                          std=[0.229 * 255, 0.224 * 255, 0.225 * 255],
                                          mirror=fn.random.coin_flip())
        return images, labels

    p = pipe()
    p.build()
    for _ in range(2):
        p.run()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        p.run()
        n += batch
    return n / (time.perf_counter() - t0)


def main():
    peer, root, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    rate = torchvision_rate(root, seconds) if peer == "torchvision" else dali_rate(root, seconds)
    print(json.dumps({"peer": peer, "images_per_s": round(rate, 2)}))


if __name__ == "__main__":
    main()

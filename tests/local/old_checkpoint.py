# SPDX-License-Identifier: Apache-2.0
"""Rewrites a checkpoint's state file as the previous dltrain wrote it: the metadata keys given are
removed and the state file's own CRC (state_crc32: CRC-32 of the whole file with its 8 digits read
as zeros) is computed again. Usage: old_checkpoint.py STATE_FILE KEY..."""
import json
import struct
import sys
import zlib


def crc_of(blob):
    return "%08x" % (zlib.crc32(blob) & 0xFFFFFFFF)


def main():
    path, keys = sys.argv[1], sys.argv[2:]
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    head = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    meta = head["__metadata__"]
    for k in keys:
        meta.pop(k, None)
    meta["state_crc32"] = "00000000"
    text = json.dumps(head, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    blob = struct.pack("<Q", len(text)) + text + data
    crc = crc_of(blob)
    blob = blob.replace(b'"state_crc32":"00000000"', b'"state_crc32":"%s"' % crc.encode(), 1)
    open(path, "wb").write(blob)


if __name__ == "__main__":
    main()

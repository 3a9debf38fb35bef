# SPDX-License-Identifier: Apache-2.0
# The ctypes example of dltpmix(3), run by tests/slurm/pmix_bootstrap.sh under srun --mpi=pmix.
import ctypes
import os

lib = ctypes.CDLL(os.environ.get("DLTPMIX_LIB", "libdltpmix.so.0"))


class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int) for n in ("rank", "size", "local_rank", "local_size",
                                            "node_rank", "node_count", "singleton")] + \
               [("nspace", ctypes.c_char * 256), ("hostname", ctypes.c_char * 256)]


lib.dltpmix_get_info.restype = ctypes.POINTER(Info)
lib.dltpmix_error.restype = ctypes.c_char_p
ctx, err = ctypes.c_void_p(), ctypes.create_string_buffer(1024)
if lib.dltpmix_init(ctypes.byref(ctx), None, err, 1024):
    raise SystemExit(err.value.decode())
info = lib.dltpmix_get_info(ctx).contents
blob = ctypes.create_string_buffer(b"hello" if info.rank == 0 else b"", 128)
if lib.dltpmix_bcast(ctx, 0, blob, 128):
    raise SystemExit(lib.dltpmix_error(ctx).decode())
print(info.rank, info.size, info.hostname.decode(), blob.value)
lib.dltpmix_finalize(ctx)

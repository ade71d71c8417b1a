"""Device memory one process owns and another maps: the GPU outbox (`outbox.Arena`) and the inputs' shelf
(`inbox.Shelf`).

The candidate process runs in its own PID namespace, across which the CUDA driver refuses legacy IPC
handles (`cuIpcOpenMemHandle`). The virtual-memory API shares an allocation as a POSIX file descriptor
instead: the reference process creates it (`cuMemCreate`, `cuMemExportToShareableHandle`), the server
passes the descriptor on over a Unix socket (`SCM_RIGHTS`), and the candidate process imports and maps it
(`cuMemImportFromShareableHandle`, `cuMemMap`) before it drops its privileges. Driver API calls through
ctypes: the driver library is the one torch already loaded, and the calls are made with torch's primary
context current on the calling thread.
"""
from __future__ import annotations

import ctypes
import os
from typing import Any

import torch

_POSIX_FD = 1          # CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
_PINNED = 1            # CU_MEM_ALLOCATION_TYPE_PINNED
_DEVICE = 1            # CU_MEM_LOCATION_TYPE_DEVICE
_READWRITE = 3         # CU_MEM_ACCESS_FLAGS_PROT_READWRITE
_GRANULARITY_MIN = 0   # CU_MEM_ALLOC_GRANULARITY_MINIMUM


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _Prop(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", _Location),
                ("win32HandleMetaData", ctypes.c_void_p), ("allocFlags", _AllocFlags)]


class _Access(ctypes.Structure):
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


_LIB: Any = None


def _lib() -> Any:
    global _LIB
    if _LIB is None:
        lib = ctypes.CDLL("libcuda.so.1")
        u64, sz = ctypes.c_uint64, ctypes.c_size_t
        sigs = {
            "cuMemGetAllocationGranularity": [ctypes.POINTER(sz), ctypes.POINTER(_Prop), ctypes.c_int],
            "cuMemCreate": [ctypes.POINTER(u64), sz, ctypes.POINTER(_Prop), u64],
            "cuMemExportToShareableHandle": [ctypes.c_void_p, u64, ctypes.c_int, u64],
            "cuMemImportFromShareableHandle": [ctypes.POINTER(u64), ctypes.c_void_p, ctypes.c_int],
            "cuMemAddressReserve": [ctypes.POINTER(u64), sz, sz, u64, u64],
            "cuMemMap": [u64, sz, sz, u64, u64],
            "cuMemSetAccess": [u64, sz, ctypes.POINTER(_Access), sz],
            "cuMemsetD8_v2": [u64, ctypes.c_ubyte, sz],
            "cuMemRelease": [u64],
            "cuMemUnmap": [u64, sz],
            "cuMemAddressFree": [u64, sz],
        }
        for name, args in sigs.items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = args, ctypes.c_int
        _LIB = lib
    return _LIB


_OUT_OF_MEMORY = 2     # CUDA_ERROR_OUT_OF_MEMORY


def _check(rc: int, what: str) -> None:
    if rc != 0:
        # the words the server's memory re-run looks for (`server.out_of_memory`), where they are true
        why = " (out of memory)" if rc == _OUT_OF_MEMORY else ""
        raise OSError(f"{what}: CUDA driver error {rc}{why}")


def _prop(device: int) -> _Prop:
    prop = _Prop()
    prop.type, prop.requestedHandleTypes = _PINNED, _POSIX_FD
    prop.location.type, prop.location.id = _DEVICE, device
    return prop


def _map(handle: int, size: int, device: int) -> int:
    lib = _lib()
    ptr = ctypes.c_uint64()
    _check(lib.cuMemAddressReserve(ctypes.byref(ptr), size, 0, 0, 0), "cuMemAddressReserve")
    _check(lib.cuMemMap(ptr.value, size, 0, handle, 0), "cuMemMap")
    access = _Access()
    access.location.type, access.location.id, access.flags = _DEVICE, device, _READWRITE
    _check(lib.cuMemSetAccess(ptr.value, size, ctypes.byref(access), 1), "cuMemSetAccess")
    return ptr.value


class _Cai:
    """Just enough of `__cuda_array_interface__` for `torch.as_tensor` to wrap mapped bytes."""

    def __init__(self, ptr: int, n: int) -> None:
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "|u1", "data": (ptr, False), "version": 2,
                                         "strides": None}


def _ready() -> int:
    torch.zeros(1, device="cuda")  # the primary context exists and is current on this thread
    return torch.cuda.current_device()


class Shared:
    """`size` bytes of device memory (rounded up to the granularity) as a uint8 tensor, `.tensor`."""

    def __init__(self, ptr: int, size: int, handle: int) -> None:
        self.ptr, self.size, self.handle = ptr, size, handle
        self.tensor = torch.as_tensor(_Cai(ptr, size), device="cuda")

    @classmethod
    def create(cls, nbytes: int) -> tuple[Shared, int]:
        """New zeroed memory, and a file descriptor that shares it (the caller closes it once sent)."""
        dev = _ready()
        lib = _lib()
        prop = _prop(dev)
        gran = ctypes.c_size_t()
        _check(lib.cuMemGetAllocationGranularity(ctypes.byref(gran), ctypes.byref(prop), _GRANULARITY_MIN),
               "cuMemGetAllocationGranularity")
        size = max(1, -(-max(1, nbytes) // gran.value)) * gran.value
        handle = ctypes.c_uint64()
        _check(lib.cuMemCreate(ctypes.byref(handle), size, ctypes.byref(prop), 0), "cuMemCreate")
        ptr = _map(handle.value, size, dev)
        _check(lib.cuMemsetD8_v2(ptr, 0, size), "cuMemsetD8")
        fd = ctypes.c_int(-1)
        _check(lib.cuMemExportToShareableHandle(ctypes.byref(fd), handle.value, _POSIX_FD, 0),
               "cuMemExportToShareableHandle")
        torch.cuda.synchronize()
        return cls(ptr, size, handle.value), fd.value

    def close(self) -> None:
        """Unmap and release the memory (this process's hold: another that mapped it keeps its own until it
        exits). The tensor is dropped first; a view of it kept elsewhere must not be used after this."""
        if self.ptr == 0:
            return
        self.tensor = None  # type: ignore[assignment]
        torch.cuda.synchronize()
        lib = _lib()
        ptr, self.ptr = self.ptr, 0
        _check(lib.cuMemUnmap(ptr, self.size), "cuMemUnmap")
        _check(lib.cuMemAddressFree(ptr, self.size), "cuMemAddressFree")
        _check(lib.cuMemRelease(self.handle), "cuMemRelease")

    @classmethod
    def open(cls, fd: int, size: int) -> Shared:
        """The memory another process shared as `fd` (`size` as it said); `fd` is closed here."""
        try:
            dev = _ready()
            lib = _lib()
            handle = ctypes.c_uint64()
            _check(lib.cuMemImportFromShareableHandle(ctypes.byref(handle), ctypes.c_void_p(fd), _POSIX_FD),
                   "cuMemImportFromShareableHandle")
            return cls(_map(handle.value, size, dev), size, handle.value)
        finally:
            os.close(fd)

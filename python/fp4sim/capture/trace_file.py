"""Writing the version-2 trace layout (docs/trace-format.md) with h5py, under a temporary name renamed into
place by commit(): a failed capture leaves no partial trace."""

from __future__ import annotations

import os

import h5py
import numpy as np

SCHEMA = "fp4-trace"
SCHEMA_VERSION = 2


def call_group_name(call: int) -> str:
    """The group of a layer's call-th forward in a step (one-based): "call_000001"."""
    return "call_%06d" % call


def step_group_name(step: int) -> str:
    return "step_%06d" % step


class TraceFile:
    def __init__(self, path: str, root_attrs: dict, compression: int):
        self.path = path
        self.tmp = "%s.tmp.%d" % (path, os.getpid())
        self.compression = compression
        self.file = h5py.File(self.tmp, "w")
        self.file.attrs["schema"] = SCHEMA
        self.file.attrs["schema_version"] = np.int64(SCHEMA_VERSION)
        for key, value in root_attrs.items():
            if value is not None and value != "":
                self.file.attrs[key] = value

    def has_step(self, step: int) -> bool:
        return step_group_name(step) in self.file

    def step_group(self, step: int, attrs: dict) -> h5py.Group:
        g = self.file.create_group(step_group_name(step))
        g.attrs["step"] = np.int64(step)
        for key, value in attrs.items():
            g.attrs[key] = value
        return g

    def array(self, group: h5py.Group, name: str, data: np.ndarray, **attrs) -> h5py.Dataset:
        """A dataset (float32 tensors in gzip+shuffle chunks of about 1 MiB of whole rows; bytes alike)."""
        kwargs = {}
        if self.compression and data.size and data.ndim == 2:
            rows = max(1, min(data.shape[0], (1 << 20) // max(1, data.itemsize * data.shape[1])))
            kwargs = dict(compression="gzip", compression_opts=self.compression, shuffle=True,
                          chunks=(rows, data.shape[1]))
        ds = group.create_dataset(name, data=data, **kwargs)
        for key, value in attrs.items():
            if value is not None:
                ds.attrs[key] = value
        return ds

    def commit(self, root_attrs: dict) -> None:
        for key, value in root_attrs.items():
            self.file.attrs[key] = value
        self.file.close()
        os.replace(self.tmp, self.path)

    def abort(self) -> None:
        if self.file.id.valid:
            self.file.close()
        if os.path.exists(self.tmp):
            os.remove(self.tmp)

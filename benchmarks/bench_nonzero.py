"""nonzero_coordinates against numpy.argwhere (CPU) and torch.nonzero / cupy.argwhere (GPU)."""

import numpy as np

import dmlnumba

from .common import gpu_or_skip, with_density


class NonzeroCPU:
    params = ([1 << 10, 1 << 16, 16 << 20], [0.01, 0.5, 0.99], ["float32", "uint8"])
    param_names = ["size", "density", "dtype"]
    timeout = 300

    def setup(self, size, density, dtype):
        shape = (16, 1024, size // (16 * 1024)) if size >= 16 << 10 else (size,)
        self.x = with_density(shape, density, dtype)
        self.count = np.empty(1, np.uint32)
        self.coords = np.empty((self.x.size, self.x.ndim), np.uint32)
        dmlnumba.nonzero_coordinates(self.x, out_count=self.count, out_coordinates=self.coords)

    def time_dmlnumba(self, size, density, dtype):
        dmlnumba.nonzero_coordinates(self.x, out_count=self.count, out_coordinates=self.coords)

    def time_dmlnumba_allocating(self, size, density, dtype):
        dmlnumba.nonzero_coordinates(self.x)

    def time_numpy_argwhere(self, size, density, dtype):
        np.argwhere(self.x)

    def peakmem_dmlnumba_allocating(self, size, density, dtype):
        dmlnumba.nonzero_coordinates(self.x)

    def peakmem_numpy_argwhere(self, size, density, dtype):
        np.argwhere(self.x)


class NonzeroGPU:
    params = ([1 << 20, 1 << 24, 1 << 28], [0.01, 0.5, 0.99])
    param_names = ["size", "density"]
    timeout = 300

    def setup(self, size, density):
        cp = self.cp = gpu_or_skip()
        import torch

        self.x = cp.random.standard_normal(size, dtype=cp.float32)
        self.x[cp.random.random(size, dtype=cp.float32) >= density] = 0
        self.t = torch.as_tensor(self.x, device="cuda")
        self.count = cp.empty(1, cp.uint32)
        self.coords = cp.empty((size, 1), cp.uint32)
        self.time_dmlnumba(size, density)

    def time_dmlnumba(self, size, density):
        dmlnumba.nonzero_coordinates(self.x, out_count=self.count, out_coordinates=self.coords)
        self.cp.cuda.runtime.deviceSynchronize()

    def time_torch_nonzero(self, size, density):
        self.t.nonzero()
        self.cp.cuda.runtime.deviceSynchronize()

    def time_cupy_argwhere(self, size, density):
        self.cp.argwhere(self.x)
        self.cp.cuda.runtime.deviceSynchronize()

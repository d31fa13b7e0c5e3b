"""slice1 against NumPy / CuPy slicing plus ascontiguousarray, and PyTorch flip-slice-contiguous."""

import numpy as np

import dmlnumba

from .common import gpu_or_skip

CASES = {
    # name: (shape, index)
    "latency_1000": ((10, 10, 10), np.s_[:, ::-1, 1::2]),
    "reverse_step_gather": ((8, 64, 256, 256), np.s_[:, ::-1, 3:250:2, 1::3]),
    "reverse_step_rows": ((8, 64, 1024, 1024), np.s_[:, ::-1, 3:1000:2, :]),
}


class Slice1CPU:
    params = (["latency_1000", "reverse_step_gather"], ["float32", "int8", "float64"])
    param_names = ["case", "dtype"]

    def setup(self, case, dtype):
        shape, self.idx = CASES[case]
        self.x = np.random.default_rng(0).standard_normal(shape).astype(dtype)
        self.w = dmlnumba.window(shape, self.idx)
        self.out = np.empty(self.w[3], dtype)
        dmlnumba.slice1(self.x, *self.w, out=self.out)

    def time_dmlnumba(self, case, dtype):
        dmlnumba.slice1(self.x, *self.w, out=self.out)

    def time_dmlnumba_allocating(self, case, dtype):
        dmlnumba.slice1(self.x, *self.w)

    def time_numpy(self, case, dtype):
        np.ascontiguousarray(self.x[self.idx])

    def peakmem_dmlnumba_allocating(self, case, dtype):
        dmlnumba.slice1(self.x, *self.w)


class Slice1GPU:
    params = (["reverse_step_gather", "reverse_step_rows"],)
    param_names = ["case"]
    timeout = 300

    def setup(self, case):
        cp = self.cp = gpu_or_skip()
        import torch

        shape, self.idx = CASES[case]
        self.x = cp.random.standard_normal(shape, dtype=cp.float32)
        self.t = torch.as_tensor(self.x, device="cuda")
        self.w = dmlnumba.window(shape, self.idx)
        self.out = cp.empty(self.w[3], cp.float32)
        self.flip = [d for d, s in enumerate(self.idx) if s.step is not None and s.step < 0]
        self.tidx = tuple(slice(s.start, s.stop, abs(s.step) if s.step else None) for s in self.idx)
        self.time_dmlnumba(case)

    def time_dmlnumba(self, case):
        dmlnumba.slice1(self.x, *self.w, out=self.out)
        self.cp.cuda.runtime.deviceSynchronize()

    def time_cupy(self, case):
        self.cp.ascontiguousarray(self.x[self.idx])
        self.cp.cuda.runtime.deviceSynchronize()

    def time_torch(self, case):
        self.t.flip(self.flip)[self.tidx].contiguous()
        self.cp.cuda.runtime.deviceSynchronize()

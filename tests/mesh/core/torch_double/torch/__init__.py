# TEST DOUBLE of PyTorch's CUDA surface: just what the GPU known-answer
# check (src/mesh/core/benchmark.h, gpu_benchmark_command) calls, computed on
# the CPU in plain Python, so that the check's program can be run and its
# answer compared on a machine without a GPU (tests/mesh/gpu_benchmark_test.cpp).
# It is not PyTorch and proves nothing about a GPU; the real check runs
# on a GPU machine (scripts/gpu-check.sh).
#
# YONDER_TORCH_DOUBLE_DEVICE: the name get_device_name answers ("" or unset:
# no CUDA device, as on a machine without one).
import os

float64 = "float64"
int64 = "int64"


class device:
    def __init__(self, name):
        self.name = name


class Tensor:
    def __init__(self, values, shape, dtype):
        self.values, self.shape, self.dtype = list(values), tuple(shape), dtype

    def reshape(self, *shape):
        if shape == (-1,):
            shape = (len(self.values),)
        return Tensor(self.values, shape, self.dtype)

    def __matmul__(self, other):
        n, k = self.shape
        k2, m = other.shape
        assert k == k2
        a, b = self.values, other.values
        out = [sum(a[i * k + j] * b[j * m + c] for j in range(k)) for i in range(n) for c in range(m)]
        return Tensor(out, (n, m), self.dtype)

    def to(self, dtype):
        cast = int if dtype == int64 else float
        return Tensor([cast(v) for v in self.values], self.shape, dtype)

    def cpu(self):
        return self

    def tolist(self):
        return list(self.values)


def tensor(values, dtype=float64, device=None):
    return Tensor([float(v) for v in values], (len(values),), dtype)


def remainder(t, p):
    return Tensor([v % p for v in t.values], t.shape, t.dtype)


class cuda:
    @staticmethod
    def is_available():
        return bool(os.environ.get("YONDER_TORCH_DOUBLE_DEVICE"))

    @staticmethod
    def get_device_name(index=0):
        return os.environ["YONDER_TORCH_DOUBLE_DEVICE"]

    @staticmethod
    def synchronize():
        pass

"""A stand-in for the few parts of PyTorch that examples/pytorch_steps.py uses, so the loop and
scripts/gpu_verify.py's overhead phase run in tests on machines without PyTorch or a GPU
(tests/gpu_verify_test.py). Each step "runs on the GPU" for STEP_S seconds, in loss.item(), where
the real loop waits for the device."""

import contextlib
import os
import time

STEP_S = float(os.environ.get("FAKE_TORCH_STEP_MS", "2")) / 1000


class _Tensor:
    def pin_memory(self):
        return self

    def to(self, *_args, **_kwargs):
        return self

    def backward(self):
        pass

    def item(self):
        time.sleep(STEP_S)  # the device finishing the step's work
        return 0.5


def randn(*_shape):
    return _Tensor()


def manual_seed(_seed):
    pass


def device(name, index=None):
    return name if index is None else f"{name}:{index}"


class _Module:
    def __init__(self, *_args, **_kwargs):
        pass

    def to(self, _device):
        return self

    def parameters(self):
        return []

    def __call__(self, x):
        return x


class _Cuda:
    class nvtx:  # noqa: N801 (torch's name)
        @staticmethod
        def range_push(_name):
            return 0

        @staticmethod
        def range_pop():
            return 0

        @staticmethod
        @contextlib.contextmanager
        def range(_name):
            yield

    @staticmethod
    def is_available():
        return True

    @staticmethod
    def set_device(_index):
        pass


cuda = _Cuda()


class nn:  # noqa: N801
    Linear = _Module
    GELU = _Module

    class Sequential(_Module):
        pass

    class functional:  # noqa: N801
        @staticmethod
        def mse_loss(_a, _b):
            return _Tensor()


class optim:  # noqa: N801
    class SGD:
        def __init__(self, *_args, **_kwargs):
            pass

        def zero_grad(self, set_to_none=True):
            pass

        def step(self):
            pass


class profiler:  # noqa: N801
    @staticmethod
    def schedule(wait=0, warmup=0, active=1, repeat=0):
        return (wait, warmup, active, repeat)

    class ProfilerActivity:
        CPU = "cpu"
        CUDA = "cuda"

    class profile:  # noqa: N801
        active = 0  # how many are open

        def __init__(self, activities=None, schedule=None):
            self.activities = activities
            self.schedule = schedule

        def __enter__(self):
            profiler.profile.active += 1
            return self

        def __exit__(self, *_exc):
            profiler.profile.active -= 1
            return False

        def step(self):
            if profiler.profile.active <= 0:
                raise RuntimeError("step() outside the profiler's window")

"""A stand-in for torch.distributed as examples/pytorch_steps.py --allreduce uses it: the
process group's calls check their order and do nothing (no GPU, no NCCL)."""

_initialized = False


def init_process_group(backend):
    global _initialized
    if _initialized or backend != "nccl":
        raise RuntimeError(f"init_process_group({backend!r}) twice or not nccl")
    _initialized = True


def all_reduce(_tensor):
    if not _initialized:
        raise RuntimeError("all_reduce before init_process_group")


def destroy_process_group():
    global _initialized
    _initialized = False

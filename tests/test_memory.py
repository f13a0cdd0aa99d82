"""Free memory of a device (Linux's MemAvailable, the free pages, CUDA's own), and which errors
are failed allocations: read from stand-ins of /proc/meminfo, os.sysconf and torch.cuda."""

import io

import pytest
import torch

import gradlab.memory as memory
from gradlab.memory import available_bytes, out_of_memory


def test_the_free_memory_of_a_cpu_is_linux_s_memavailable(monkeypatch):

    def meminfo(text):
        def fake_open(path, *args, **kwargs):
            assert path == "/proc/meminfo"
            return io.StringIO(text)

        return fake_open

    monkeypatch.setattr(memory, "open", meminfo("MemTotal: 9 kB\nMemAvailable:   2048 kB\n"),
                        raising=False)  # fmt: skip
    assert available_bytes("cpu") == 2048 * 1024
    # without the line (an older kernel), or without the file: the free physical pages
    pages = {"SC_AVPHYS_PAGES": 3, "SC_PAGE_SIZE": 4096}
    monkeypatch.setattr("os.sysconf", lambda name: pages[name])
    monkeypatch.setattr(memory, "open", meminfo("MemTotal: 9 kB\n"), raising=False)
    assert available_bytes("cpu") == 3 * 4096

    def no_file(path, *args, **kwargs):
        raise FileNotFoundError(path)

    monkeypatch.setattr(memory, "open", no_file, raising=False)
    assert available_bytes("cpu") == 3 * 4096

    def unknown(name):
        raise ValueError(f"unrecognized configuration name {name!r}")

    monkeypatch.setattr("os.sysconf", unknown)
    assert available_bytes("cpu") is None


def test_the_free_memory_of_a_cuda_device_is_its_own(monkeypatch):
    asked = []

    def mem_get_info(device):
        asked.append(device)
        return (5 * 2**30, 80 * 2**30)  # (free, total)

    monkeypatch.setattr("torch.cuda.mem_get_info", mem_get_info)
    assert available_bytes("cuda:1") == 5 * 2**30
    assert asked == [torch.device("cuda:1")]


@pytest.mark.parametrize(("error", "failed"), [
    (MemoryError(), True),
    (torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"), True),
    (RuntimeError("[enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: can't allocate "
                  "memory: you tried to allocate 80000000000 bytes"), True),
    (RuntimeError("a kernel failed"), False),
    (ValueError("can't allocate memory"), False),  # not an allocator's error type
])  # fmt: skip
def test_a_failed_allocation_is_told_from_other_errors(error, failed):
    assert out_of_memory(error) is failed


def test_only_a_failed_allocation_becomes_the_one_line_refusal():
    from gradlab.errors import GradlabError
    from gradlab.memory import refused_when_out_of_memory

    with pytest.raises(GradlabError, match=r"^lower --batch-size$") as caught:
        with refused_when_out_of_memory("lower --batch-size"):
            raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to "
                               "allocate 8 bytes")
    assert caught.value.__cause__ is None and caught.value.__suppress_context__  # no traceback
    with pytest.raises(RuntimeError, match=r"^a kernel failed$"):  # anything else passes
        with refused_when_out_of_memory("lower --batch-size"):
            raise RuntimeError("a kernel failed")
    with refused_when_out_of_memory("unused"):  # no error: nothing happens
        pass

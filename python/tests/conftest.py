"""Fixtures the tracer's tests share."""

import pytest


@pytest.fixture
def as_2_11(monkeypatch):
    """Under a later torch, the settings that make its rules 2.11's where they differ by default
    (the GPU recordings are 2.11's): torch 2.15 allocates cuBLAS workspaces per call unless
    TORCH_CUBLAS_WORKSPACE_CACHE is true (CublasHandlePool.cpp, PR #194311), and then shares
    cuBLASLt's unless TORCH_CUBLASLT_UNIFIED_WORKSPACE is false. test_trace_rules.py checks what
    2.15's default changes."""
    torch = pytest.importorskip("torch")
    from vramlab._tracer.compat import release

    if release(torch) >= (2, 15):
        monkeypatch.setenv("TORCH_CUBLAS_WORKSPACE_CACHE", "1")
        monkeypatch.setenv("TORCH_CUBLASLT_UNIFIED_WORKSPACE", "0")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    """Under pytest-xdist's ``--dist loadgroup`` (CI's), the tests that compare one traced workload
    run in one worker, so the trace each file keeps per process is made once, not once per worker
    (a trace is seconds of CPU; CI's 20 minutes on two cores are bounded). First, so that the
    marks are there when xdist's worker names each test by its group."""
    for item in items:
        params = getattr(item, "callspec", None)
        params = params.params if params else {}
        if item.path.name == "test_trace.py" and "name" in params:
            item.add_marker(pytest.mark.xdist_group(f"trace-{params['name']}"))
        elif item.path.name == "test_trace_distributed.py" and "folder" in params:
            # A recording's folder is named after its workload.
            item.add_marker(pytest.mark.xdist_group(f"ranks-{params['folder'].name}"))
        elif item.path.name == "test_trace_distributed.py" and "world_size" in params and "name" in params:
            item.add_marker(pytest.mark.xdist_group(f"ranks-{params['name']}"))
        elif item.path.name == "test_trace_distributed.py" and "group" in params:
            item.add_marker(pytest.mark.xdist_group(f"torchrun-{params['name']}"))

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

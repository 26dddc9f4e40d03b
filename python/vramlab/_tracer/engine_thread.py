"""Backward passes that build a graph (``create_graph=True``) run on a thread of their own, as CUDA
runs them: on the autograd engine's worker thread for the device.

The engine runs a ready node before another when its sequence number is higher
(``torch/csrc/autograd/engine.cpp``, ``CompareNodeTaskTime``; the same reentrant depth). A node
takes its number from a counter that is per thread (``aten/src/ATen/SequenceNumber.cpp``:
``thread_local``). On the GPU the nodes a forward makes number from the program's thread, and
those a backward with ``create_graph=True`` makes (the gradient penalty's double backward, MAML's
inner gradients) from the device's worker thread, which started at zero and has made few: so a
later backward over both runs every node of the forward it can before the double-backward chain.
Stand-ins are meta tensors, whose backward the engine runs in the calling thread: the
double-backward nodes would number after the forward's and run first, holding the forward's
activations longer (issue 36's tenth group: a WGAN-GP critic under DDP, +7% allocated; the
H100 recordings' wgan_gp_mlp, +0.47%, and maml_second_order, +0.21%, exact with it).

So such a pass runs on one persistent thread, the trace's device worker, carrying what PyTorch
carries into its worker (``at::ThreadLocalState``): the dispatch modes and autocast's state. A
pass made inside it (a reentrant one) runs in place; one under torch.func's transforms runs in
the program's thread, as their levels are the program thread's."""

from __future__ import annotations

import queue
import threading
from typing import Any, Callable, Optional, Tuple

from .standin import Table

# Autocast's per-thread state that the engine's ThreadLocalState carries to its worker.
_AUTOCAST_DEVICES = ("cuda", "cpu")


class DeviceWorker:
    """One persistent thread that runs graph-building backward passes for the program's thread."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self._jobs: "queue.Queue[Optional[Tuple[Callable[[], Any], queue.Queue[Any]]]]" = queue.Queue()
        self._thread: Optional[threading.Thread] = None

    def _carried(self) -> Callable[[Callable[[], Any]], Any]:
        """The caller's thread-local state, as a function that runs a job under it."""
        torch = self.torch
        from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

        modes = list(_get_current_dispatch_mode_stack())
        autocast = [(d, torch.is_autocast_enabled(d), torch.get_autocast_dtype(d)) for d in _AUTOCAST_DEVICES]
        cache = torch.is_autocast_cache_enabled()

        def under(job: Callable[[], Any]) -> Any:
            before = [(d, torch.is_autocast_enabled(d), torch.get_autocast_dtype(d)) for d in _AUTOCAST_DEVICES]
            cached_before = torch.is_autocast_cache_enabled()
            for device, enabled, dtype in autocast:
                torch.set_autocast_enabled(device, enabled)
                torch.set_autocast_dtype(device, dtype)
            torch.set_autocast_cache_enabled(cache)
            for mode in modes:
                torch._C._push_on_torch_dispatch_stack(mode)
            try:
                return job()
            finally:
                for _ in modes:
                    torch._C._pop_torch_dispatch_stack(None)
                for device, enabled, dtype in before:
                    torch.set_autocast_enabled(device, enabled)
                    torch.set_autocast_dtype(device, dtype)
                torch.set_autocast_cache_enabled(cached_before)

        return under

    def run(self, job: Callable[[], Any]) -> Any:
        if threading.current_thread() is self._thread:
            return job()
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name="vramlab-autograd-device", daemon=True)
            self._thread.start()
        under = self._carried()
        answer: "queue.Queue[Any]" = queue.Queue()
        self._jobs.put((lambda: under(job), answer))
        ok, value = answer.get()
        if ok:
            return value
        raise value

    def _serve(self) -> None:
        while True:
            item = self._jobs.get()
            if item is None:
                return
            job, answer = item
            # The job holds the outputs it differentiates, and through them their graph: nothing
            # here may keep it past the pass (the program's thread frees it as the GPU would).
            del item
            try:
                result = (True, job())
            except BaseException as error:  # noqa: BLE001 - handed to the program's thread
                result = (False, error)
            del job
            answer.put(result)
            del answer, result

    def stop(self) -> None:
        if self._thread is not None:
            self._jobs.put(None)
            self._thread.join()
            self._thread = None


def engine_paths(session: Any) -> Table:
    """torch.autograd's call into the engine, sent to the device worker where it builds a graph."""
    torch = session.torch
    import torch.autograd as autograd

    run_backward = getattr(autograd, "_engine_run_backward", None)
    if run_backward is None:
        return {}
    worker = session.device_worker

    def engine_run_backward(t_outputs: Any, *args: Any, **kwargs: Any) -> Any:
        # (grad_tensors, retain_graph, create_graph, inputs, ...) in both backward() and grad().
        create_graph = kwargs.get("create_graph", args[2] if len(args) > 2 else False)
        functorch = torch._C._functorch.maybe_current_level() is not None
        if not create_graph or functorch:
            return run_backward(t_outputs, *args, **kwargs)
        return worker.run(lambda: run_backward(t_outputs, *args, **kwargs))

    return {(autograd, "_engine_run_backward"): engine_run_backward}

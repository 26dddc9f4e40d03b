"""vramlab.trace's machinery (the public entry is vramlab.trace):

- ``session.py``: one trace, putting the parts together on entering and taking them apart on leaving;
- ``recorder.py``: events, storages and their resizes, notes, the snapshot and its atomic save;
- ``standin.py``: ``torch.cuda`` and ``torch.accelerator`` as one table of answers;
- ``paths.py``: PyTorch's own Python that asks the device (optimizers, checkpointing, autocast, ...);
- ``modes.py``: the two modes, which make stand-ins and ask the rules;
- ``rules/``: one module per operator family, each naming its source;
- ``values.py``: values known without a GPU;
- ``streams.py``: CUDA streams and events, the recorder's current stream;
- ``distributed.py``: one rank of a distributed program (the stand-in process group);
- ``ranks.py``: ``--nproc``, a torchrun script traced once per rank;
- ``compat.py``: the torch releases followed, and rules keyed by release;
- ``where.py``: the program's line, for frames and messages.
"""

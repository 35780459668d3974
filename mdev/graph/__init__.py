"""Graphs: model run instances (``aclmdlRI*``) built on persistent streams or captured
from ordinary streams, stored on the device and replayed by one task.

    recorder.py   host: work recorded instead of run (a capture, a persistent stream, a
                  task update in progress) and the capture restrictions
    model.py      host: the model run instance, its API (build, bind, capture, execute,
                  task groups, update, destroy) and its debug dumps
    executor.py   device: stored graphs and the ``run_graph`` task that replays one

Runtime modules call into ``recorder`` through one-line hooks (``streams.submit``, event
record/wait/query, synchronisations, synchronous memory operations); everything about
capture lives here.
"""

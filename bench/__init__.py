"""mdev benchmarks: ``python -m bench`` runs them all, ``python -m bench.copies`` one group.

    bench.copies    256 MiB H2D / D2H / D2D, async and sync, against numpy.copyto
    bench.tasks     small async task throughput, synchronisation round trips vs a bare pipe
    bench.startup   8-device board cold start + first set_device(0), device process footprint

Each group starts its own board (``bench-<pid>-<tag>``) and stops it when done.
"""

GROUPS = ("copies", "tasks", "startup")

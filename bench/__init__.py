"""mdev benchmarks: ``python -m bench`` runs them all, ``python -m bench.copies`` one group.

    bench.copies    256 MiB H2D / D2H / D2D, async and sync, against numpy.copyto
    bench.tasks     small async task throughput, synchronisation round trips vs a bare pipe
    bench.startup   8-device board cold start + first set_device(0), device process footprint;
                    start, stop and PSS/USS per device at 8, 64, 384, 1024 devices, cloudmatrix384
    bench.kernels   empty-kernel launch rate (1 and 48 blocks), 16M float32 vector add vs np.add
    bench.ipc       a second process reads 256 MiB exported from another device (IPC key, VMM)
    bench.async_tasks  event record/wait chains across 2 streams vs small tasks, query_event_status
                    cost, CPU of a stream waiting on an event
    bench.p2p       256 MiB device-to-device copy with peer access vs numpy.copyto; 8-device
                    all-to-all of 16 MiB per pair (wall time, aggregate GB/s)
    bench.graph     host time per task: replay of 1,000 captured small tasks vs issuing them
    bench.trace     small-task rate with timeline tracing (MDEV_TRACE) vs without, cost of writing a trace
    bench.sanitize  small-task rate with the sanitizer (memcheck+racecheck, all checks) vs without
    bench.hccl      collectives like hccl_test: per size wall and modelled time, algbw / busbw,
                    HCCL's formula and modelled / formula, numpy doing the same reduction
    bench.meeting   the floor under a whole collective: two processes meeting as coll_run's
                    ranks do, a 1 MiB all-reduce in plain Python, vs numpy's add
    bench.capi      the same small-task loops from C (libascendcl.so) and from Python: the C layer's cost
    bench.ascendc   native Ascend C kernels: empty <<<1>>> / <<<48>>> launch rate vs a Python @kernel,
                    add_custom of 8 x 2048 halves vs numpy's add
    bench.torch_npu x.add_(1) ops/s, an MLP step and a 4 x Linear 1024 step (SGD, AdamW) through
                    torch_npu vs torch's CPU; a DDP step on 2 and 8 ranks vs 1
    bench.dispatch  dispatch speed beside raw OS primitives: small tasks vs pipe messages, a round
                    trip vs a pipe ping-pong, 48 vs 1 kernel blocks, stream churn, 4 threads x 4 devices

Each group starts its own board (``bench-<pid>-<tag>``) and stops it when done.
"""

GROUPS = ("copies", "tasks", "startup", "kernels", "ipc", "async_tasks", "p2p", "graph", "trace", "sanitize",
          "hccl", "meeting", "capi", "dispatch", "ascendc", "torch_npu")

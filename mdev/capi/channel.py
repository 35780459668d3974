"""The shared area between a C program (libmdev_client.so) and its host agent: the layout.

    memfd area (created by the C side, mapped by both, fd 3 of the agent)
    +--------+--------+--------+-- ... --+--------+------------------+
    | header | slot 0 | slot 1 |         | slot N | kept (strings C  |
    +--------+--------+--------+-- ... --+--------+  may keep using) |

One *slot* per C thread that calls the API (role CALLER), and per C thread that runs host
callbacks for the agent (SERVICE; one SPAWNER starts more).  A slot's ``state`` word is a
futex both sides sleep on:

    C caller:  IDLE --writes name, format, arguments--> CALL          (wake)
    agent:     CALL --runs the call--> DONE                            (wake)
               or, mid-call, asks the C thread for a service: SERVICE  (wake)
    C thread:  SERVICE --maps a segment / runs a C function--> SERVED  (wake)
    C thread exits: CLOSED; the agent's thread for the slot ends and frees it (FREE)

An asynchronous call (mdev.capi.asynchronous) whose arguments pass the checks its
spec names against the slot's *grants* does not wait: the C thread appends it to the
slot's *ring* (face, function index, numeric arguments; RING_TAIL advanced) and returns
ACL_SUCCESS.  Its agent thread runs the ring's entries in order (RING_HEAD advanced after
each), always before the slot's next CALL.  Both a CALL and a ring entry ring the slot's
DOORBELL (a counter the idle agent thread sleeps on).  Grants are what the agent found
valid when it last ran such a call synchronously for this thread (streams, device
allocations, events), stamped with the area's EPOCH at that time; the agent advances the
epoch around every call that could make a grant false (a free, a destroy, a context
switch...), so a stale grant is never used.  A synchronous call of any thread first waits
until the entries other threads appended before it have run (their calls returned first).

A C function run as a service may call the API again (a callback): that call comes on the
same slot (CALL while the agent waits for SERVED), and the agent thread runs it before
going on waiting.  A C thread claims a slot FREE -> OPENING (its role, its thread id) -> IDLE.  A side about to
sleep on the state says so (S_C_SLEEPS, S_AGENT_SLEEPS, sequentially consistent, as the
state's stores): the other side wakes it only then, so calls in quick succession cost no
system call.

Everything here is a byte offset; :func:`c_defines` writes the same numbers into the C
library's configuration header, so the two sides cannot drift apart.
"""

from __future__ import annotations

HEADER_BYTES = 4096
H_OPENED = 4            # u32: counts slots opened (the agent's control thread sleeps on it)
H_READY = 8             # u32: 0 starting, 1 serving, 2 failed (H_ERROR says why)
H_AGENT_PID = 12        # i32
H_WINDOW = 16           # u64: the reserved address window both processes map pinned memory in
H_WINDOW_SIZE = 24      # u64
H_CLIENT_AREA = 32      # u64: where the C side maps this area
H_EPOCH = 40            # u32: grants stamped with another value are void
H_ERROR = 64            # char[1024]
ERROR_BYTES = 1024
# executors granted by any thread's aclnnXGetWorkspaceSize, taken by the C thread queueing
# their run: {u64 handle (0 none, EXECUTOR_WRITING while the agent writes it), u32 device + 1,
# u32 the epoch it holds for}; the agent changes an entry only after taking it over by its
# handle, so a C thread that took the handle it saw has read the entry whole
H_EXECUTORS, EXECUTOR_GRANTS = 2048, 64
EXECUTOR_WRITING = 1
# device allocations granted area-wide for operator runs of executors the C side made
# (mdev.capi.local): {u64 start, u64 end, u32 device + 1, u32 epoch, u32 seq (odd while the
# agent writes the entry: a reader seeing it change or odd ignores what it read), u32 -}
H_ALLOCS, ALLOC_GRANTS, ALLOC_BYTES = 3072, 24, 32

SLOTS = 256
S_STATE, S_ROLE, S_OK, S_STORED = 0, 4, 8, 12           # u32 each
S_RET = 16                                                # u64
S_OUT = 24                                                # u64[8]
S_KIND = 96                                               # u64: service kind
S_ARGS = 104                                              # u64[8]: service arguments
S_RESULT = 168                                            # u64: service result
S_THREAD = 176                                            # u64: the C thread's pthread_t
S_C_SLEEPS, S_AGENT_SLEEPS = 184, 188                     # u32: that side sleeps on the state
S_NAME, NAME_BYTES = 192, 64                              # the C function's name
S_FORMAT, FORMAT_BYTES = 256, 32                          # argument letters (mdev_embed.h)
S_OUTPUTS, OUTPUTS_BYTES = 288, 16                        # output letters
S_DATA = 304                                              # arguments; a service's data
S_TEXT = 32768                                            # text returned to the C thread
DATA_BYTES = S_TEXT - S_DATA
TEXT_BYTES = 65536 - S_TEXT
S_DOORBELL = 65536                                        # u32: C adds 1 per CALL and per ring entry
S_RING_HEAD, S_RING_TAIL = 65540, 65544                   # u32: entries run (agent), appended (C)
S_GRANT_EPOCH = 65548                                     # u32: the epoch the grants hold for
S_INDEX = 65552                                           # u32: the called function's index in its face
S_FACE = 65560                                            # u64: its face (the C table's address)
S_SIGNED = 65568                                          # u32: the GetWorkspaceSize's signature may be
                                                          # answered by the C side from now on
# grants, an entry's device stored + 1 (0: an empty entry)
S_STREAMS, STREAM_GRANTS = 65600, 8                       # {u64 handle, u32 device + 1, u32 its pid}
S_RANGES, RANGE_GRANTS = 65728, 16                        # {u64 start, u64 end, u32 device + 1, u32 -}
S_EVENTS, EVENT_GRANTS = 66112, 16                        # {u64 handle, u32 device + 1, u32 flags}
# for stream grant k: where the C side reads its stream's failure word (the device's control
# page, mapped into the program) when its context stops on failure, else 0 (u64 each)
S_STOPS = 66368
G_WAIT = 1                                                # event flag: a stream may wait on it
PLAIN_KINDS = 5                                           # copy kinds 0..4 (mdev.capi.asynchronous)
DEVICE_FDS = 64                                           # devices whose process the C side watches
S_RING = 66560
RING_ARGS = 8
ENTRY_BYTES = 16 + 8 * RING_ARGS                          # {u64 face, u32 index, u32 -, u64 args[8]}
RING_ENTRIES = 512
SLOT_BYTES = S_RING + RING_ENTRIES * ENTRY_BYTES
assert H_EXECUTORS + 16 * EXECUTOR_GRANTS <= H_ALLOCS and H_ALLOCS + ALLOC_BYTES * ALLOC_GRANTS <= HEADER_BYTES
assert S_EVENTS + 16 * EVENT_GRANTS <= S_STOPS and S_STOPS + 8 * STREAM_GRANTS <= S_RING

KEPT_BYTES = 1 << 20
# executors made by the C side (mdev.capi.local), after the kept bytes: each record
# {u64 handle, u32 state, u32 the GetWorkspaceSize's index in its face, u64 its face,
#  u32 argument words, u32 packed bytes, u64 words[LOCAL_WORDS], the descriptors' copy}
LOCAL_AT = HEADER_BYTES + SLOTS * SLOT_BYTES + KEPT_BYTES
LOCAL_RECORDS, LOCAL_BYTES, LOCAL_WORDS = 256, 2048, 16
L_HANDLE, L_STATE, L_INDEX, L_FACE, L_WORDS, L_PACKED_BYTES, L_ARGS = 0, 8, 12, 16, 24, 28, 32
L_PACKED = L_ARGS + 8 * LOCAL_WORDS
LOCAL_FREE, LOCAL_WRITING, LOCAL_READY, LOCAL_TAKEN = 0, 1, 2, 3
LOCAL_TAG = 0x6D << 56          # a record's handle: LOCAL_TAG | a count << 16 | the record's index
AREA_BYTES = LOCAL_AT + LOCAL_RECORDS * LOCAL_BYTES
WINDOW_BYTES = 1 << 40          # address space only (PROT_NONE, no reserve) until mapped

FREE, IDLE, CALL, DONE, SERVICE, SERVED, CLOSED, OPENING = range(8)
CALLER, SERVICE_ROLE, SPAWNER = 1, 2, 3
K_CALL, K_MAP, K_RESERVE, K_PRIVATE, K_SPAWN = 1, 2, 3, 4, 5


def slot_offset(index: int) -> int:
    return HEADER_BYTES + index * SLOT_BYTES


def c_defines() -> str:
    """The layout as C #defines (MDEV_CH_<NAME>)."""
    names = [n for n, v in globals().items() if n.isupper() and isinstance(v, int)]
    return "".join(f"#define MDEV_CH_{n} {globals()[n]}ULL\n" for n in names)

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
H_ERROR = 64            # char[1024]
ERROR_BYTES = 1024

SLOT_BYTES = 65536
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
TEXT_BYTES = SLOT_BYTES - S_TEXT

KEPT_BYTES = 1 << 20
AREA_BYTES = HEADER_BYTES + SLOTS * SLOT_BYTES + KEPT_BYTES
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

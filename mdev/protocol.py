"""Messages between host processes, the supervisor and device processes.

Every connection is an AF_UNIX stream socket authenticated with the board secret (the
HMAC challenge of ``multiprocessing.connection``).  After that, a message is a 4-byte
little-endian length followed by a tuple of plain data, pickled (or, for the commonest
small messages, packed with struct: see COMPACT):

    host --("t", slot, seq, op, args)--> device      a stream task (fire and forget)
    host --("r", req, op, args)-------> device       a request;  reply ("r", req, code, value)
    device --("cb", ...)--------------> host         device-initiated (callbacks, reports)

Both ends prove they hold the 0600 secret before anything else is read.  Even then a
frame decodes to data only: builtins (tuples, lists, dicts, str, bytes, numbers, None,
bool), never an object of a class, so no frame can make its receiver run code.  A holder of
the secret may still be hostile: the supervisor and the devices decode with mdev.frameshape
(bounded as it builds, then the message checked against the shapes its receiver serves),
cap the partial frames each peer process has buffered (PeerBuffers), and close only the
connection a bad frame came on.  Kernels
are the one exception, and not at this layer: a host ships its kernel as opaque cloudpickled
bytes inside a frame, and only a device process loads them (``register_kernel``).

Who is at the other end of a connection is the kernel's word (SO_PEERCRED: pid and uid,
``peer_credentials``), never what a message says: a peer of another uid is refused before
the handshake.  Client ids a host names in its hello to a device come with a seal
(``seal``: an HMAC with a key only the supervisor and its devices hold) binding the id to
the pid the supervisor saw attach; IPC imports come with a seal of what was granted.
"""

from __future__ import annotations

import collections
import hashlib
import hmac
import io
import os
import pickle
import select
import socket
import struct
import threading
import time
import traceback
from multiprocessing.connection import Connection, answer_challenge, deliver_challenge

from mdev import frameshape
from mdev.frameshape import FrameError, Shapes

_LEN = struct.Struct("<I")

# The largest frame accepted.  mdev's own messages are small (task arguments, replies,
# descriptions of at most a few MiB for a 1024-device board); the big ones are kernels
# shipped by value, whose closures may carry arrays.  Past this a peer is broken or
# hostile: its connection is closed before the frame is buffered (a 4-byte length could
# otherwise announce 4 GiB).
MAX_FRAME = 256 << 20

# How long a new connection has to prove it holds the secret, and how many may be trying
# at once (each costs a thread; the socket is reachable only by the board's user).
HANDSHAKE_TIMEOUT = 5.0
MAX_HANDSHAKES = 64

# graph-local markers inside a stored graph's lanes (host capture writes them, device replay obeys)
GRAPH_RECORD, GRAPH_WAIT, GRAPH_ACTIVATE = "graph_record", "graph_wait", "graph_activate"
GRAPH_LABEL, GRAPH_SWITCH = "graph_label", "graph_switch"      # aclrtSetLabel / aclrtSwitchLabelByIndex
GRAPH_STREAM_SWITCH = "graph_stream_switch"                   # aclrtSwitchStream
GRAPH_COND = "graph_cond"                                     # aclmdlRIAddCondTask: IF / WHILE / SWITCH


class ChannelClosed(Exception):
    pass


class _DataUnpickler(pickle.Unpickler):
    """Unpickles plain data only: every class or function a frame names is refused (the
    pickle opcodes that build objects all go through find_class)."""

    def find_class(self, module: str, name: str):
        raise pickle.UnpicklingError(f"a frame names {module}.{name}; frames carry data only")


def handshake(sock: socket.socket, authkey: bytes, server: bool, timeout: float = 5.0) -> None:
    """Mutual HMAC challenge; raises AuthenticationError on a wrong secret.

    The fd must stay blocking (Connection reads it with os.read), so the time limit is
    the kernel's SO_RCVTIMEO/SO_SNDTIMEO rather than a socket timeout.
    """
    sock.setblocking(True)
    limit = struct.pack("ll", int(timeout), int(timeout % 1 * 1e6))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, limit)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, limit)
    conn = Connection(sock.fileno())
    try:
        if server:
            deliver_challenge(conn, authkey)
            answer_challenge(conn, authkey)
        else:
            answer_challenge(conn, authkey)
            deliver_challenge(conn, authkey)
    finally:
        conn._handle = None  # the socket keeps owning the fd
        unlimited = struct.pack("ll", 0, 0)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, unlimited)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, unlimited)


def encode(message: tuple) -> bytes:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _LEN.pack(len(data)) + data


# ---------------------------------------------------------------------------- compact frames
# The commonest small messages travel without the pickler, whose encoding and restricted
# decoding are most of what such a task costs on either side.  Their frame's length word
# has COMPACT set; the frame is struct-packed: a code (the message's index in COMPACT_TASKS
# then COMPACT_MESSAGES), then for a task its slot, seq and arguments by the op's signature
# -- "i" a signed 64-bit int, "d" a location on a device (("d", device, offset)) -- and for
# another message its int fields.  It decodes to the same message as the pickled frame,
# of ints only.  Values that do not fit (pinned memory, huge ints) are pickled.
COMPACT = 1 << 31
COMPACT_TASKS = (("memset", "dii"), ("fill32", "dii"), ("copy", "ddi"),
                 ("record_event", "ii"), ("reset_event", "ii"))
COMPACT_MESSAGES = (("sc", 4), ("sd", 1), ("ec", 1), ("ed", 2))    # kind, int fields: made / destroyed


class _Compact:
    """The codec of one compact message.  Its two functions are generated from this module's
    own tables (never a peer's): a loop over the fields would cost what the pickler does."""

    def __init__(self, code: int, name: str, signature: str, task: bool) -> None:
        self.name = name
        names = [f"a{i}" for i in range(len(signature))]
        fields = "".join("HQ" if kind == "d" else "q" for kind in signature)
        self.struct = struct.Struct("<IB" + ("IQ" if task else "") + fields)
        checks = " and ".join(f"type({n}) is tuple and len({n}) == 3 and {n}[0] == 'd'" if kind == "d"
                              else f"type({n}) is int" for n, kind in zip(names, signature))
        values = ", ".join(f"{n}[1], {n}[2]" if kind == "d" else n for n, kind in zip(names, signature))
        # decode unpacks into locals (faster than indexing the unpacked tuple)
        unpacked = ["_n", "_c"] + (["slot", "seq"] if task else [])
        built = []
        for n, kind in zip(names, signature):
            unpacked += [f"{n}d", f"{n}o"] if kind == "d" else [n]
            built.append(f"('d', {n}d, {n}o)" if kind == "d" else n)
        head = f"{(self.struct.size - 4) | COMPACT}, {code}"
        if task:
            source = (f"def encode(slot, seq, args):\n"
                      f"    {', '.join(names)}, = args\n"
                      f"    if {checks}:\n"
                      f"        return pack({head}, slot, seq, {values})\n"
                      f"def decode(buf, pos):\n"
                      f"    {', '.join(unpacked)}, = unpack_from(buf, pos)\n"
                      f"    return ('t', slot, seq, name, ({', '.join(built)},))\n")
        else:
            source = (f"def encode(message):\n"
                      f"    _, {', '.join(names)}, = message\n"
                      f"    if {checks}:\n"
                      f"        return pack({head}, {values})\n"
                      f"def decode(buf, pos):\n"
                      f"    {', '.join(unpacked)}, = unpack_from(buf, pos)\n"
                      f"    return (name, {', '.join(built)},)\n")
        scope = {"pack": self.struct.pack, "unpack_from": self.struct.unpack_from, "name": name}
        exec(source, scope)
        self.encode, self.decode = scope["encode"], scope["decode"]


class _KernelLaunch:
    """The compact codec of a kernel launch task ("kernel" or "native_kernel"), whose frame
    has the length of its arguments: a head of the launch's ints, then the argument values
    (int64s for "values" of ints only, the bytes of a "bytes" block, or a "loc" triple), the
    pinned map (host address, size, then a segment name or a device location) and the
    placeholders (offset, bytes).  It decodes to the message the pickled frame would:
    ("t", slot, seq, op, (fid, blocks, kind, args, placeholders, limit, pinned, timeout_s)).
    A launch of other values (floats, objects, a pinned map of other entries) is pickled."""

    HEAD = struct.Struct("<IBIQqqqdBIHH")   # length, code, slot, seq, fid, blocks, limit, timeout_s,
    #                                         args kind, its count (ints, bytes), pinned entries, placeholders
    KINDS = ("values", "bytes", "loc")
    PINNED = struct.Struct("<QQB")          # host address, size, target: 0 a segment name, 1 a device location
    NAME = struct.Struct("<H")
    LOCATION = struct.Struct("<IQ")
    HOLDER = struct.Struct("<qI")           # the argument's offset, its data's length

    def __init__(self, code: int, name: str) -> None:
        self.code, self.name = code, name
        self._ints: dict[int, struct.Struct] = {}

    def ints(self, count: int) -> struct.Struct:
        codec = self._ints.get(count)
        if codec is None:
            codec = struct.Struct(f"<{count}q")
            if count <= 64:         # the counts launches have (a peer's others are not kept)
                self._ints[count] = codec
        return codec

    def encode(self, slot: int, seq: int, args: tuple) -> bytes | None:
        fid, blocks, kind, values, placeholders, limit, pinned, timeout_s = args
        if type(timeout_s) is not float:
            return None
        if kind == "bytes" and type(values) is bytes:
            body, count, k = values, len(values), 1
        elif (kind == "values" or kind == "loc") and type(values) is tuple:
            for value in values:
                if type(value) is not int:
                    return None
            count, k = len(values), 0 if kind == "values" else 2
            body = self.ints(count).pack(*values)
        else:
            return None
        if not pinned and not placeholders:         # the common launch: one pack, one concatenation
            return self.HEAD.pack((self.HEAD.size - 4 + len(body)) | COMPACT, self.code, slot, seq, fid, blocks,
                                  limit, timeout_s, k, count, 0, 0) + body
        parts = [b"", body]
        for base, size, target in pinned:
            if type(target) is str:
                raw = target.encode()
                parts += [self.PINNED.pack(base, size, 0), self.NAME.pack(len(raw)), raw]
            elif type(target) is tuple and len(target) == 3 and target[0] == "d":
                parts += [self.PINNED.pack(base, size, 1), self.LOCATION.pack(target[1], target[2])]
            else:
                return None
        for offset, data in placeholders:
            if type(data) is not bytes:
                return None
            parts += [self.HOLDER.pack(offset, len(data)), data]
        length = self.HEAD.size - 4 + sum(len(part) for part in parts)
        parts[0] = self.HEAD.pack(length | COMPACT, self.code, slot, seq, fid, blocks, limit, timeout_s, k, count,
                                  len(pinned), len(placeholders))
        return b"".join(parts)

    def decode(self, buf, pos: int, n: int) -> tuple:
        """The message of the frame of ``n`` bytes after its length word at ``pos`` (whole in
        ``buf``); FrameError if its counts do not fit its length exactly."""
        end = pos + 4 + n
        head = self.HEAD
        if n + 4 < head.size:
            raise FrameError(f"a kernel launch frame of {n} bytes, shorter than its head")
        _, _, slot, seq, fid, blocks, limit, timeout_s, k, count, npinned, nholders = head.unpack_from(buf, pos)
        if not (npinned or nholders) and k < 3 and head.size + (count if k == 1 else 8 * count) == n + 4:
            # the common launch: no pinned memory, no placeholders
            at = pos + head.size
            values = bytes(buf[at:end]) if k == 1 else self.ints(count).unpack_from(buf, at)
            return ("t", slot, seq, self.name, (fid, blocks, self.KINDS[k], values, [], limit, (), timeout_s))

        def take(nbytes: int) -> int:
            nonlocal at
            if at + nbytes > end:
                raise FrameError(f"a kernel launch frame of {n} bytes ends inside its fields")
            at += nbytes
            return at - nbytes

        at = pos + head.size
        if k == 1:
            values = bytes(buf[take(count):at])
        elif k < len(self.KINDS):
            values = self.ints(count).unpack_from(buf, take(8 * count))
        else:
            raise FrameError(f"a kernel launch of argument kind {k}")
        pinned = []
        for _ in range(npinned):
            base, size, tag = self.PINNED.unpack_from(buf, take(self.PINNED.size))
            if tag == 0:
                (length,) = self.NAME.unpack_from(buf, take(self.NAME.size))
                try:
                    pinned.append((base, size, bytes(buf[take(length):at]).decode()))
                except UnicodeDecodeError:
                    raise FrameError("a pinned segment name that is not UTF-8") from None
            elif tag == 1:
                pinned.append((base, size, ("d", *self.LOCATION.unpack_from(buf, take(self.LOCATION.size)))))
            else:
                raise FrameError(f"a pinned map entry of kind {tag}")
        placeholders = []
        for _ in range(nholders):
            offset, length = self.HOLDER.unpack_from(buf, take(self.HOLDER.size))
            placeholders.append((offset, bytes(buf[take(length):at])))
        if at != end:
            raise FrameError(f"a kernel launch frame of {n} bytes holding {at - pos - 4}")
        return ("t", slot, seq, self.name, (fid, blocks, self.KINDS[k], values, placeholders, limit,
                                            tuple(pinned), timeout_s))


_COMPACT_BY_CODE = [_Compact(code, op, signature, True) for code, (op, signature) in enumerate(COMPACT_TASKS)] + \
    [_Compact(len(COMPACT_TASKS) + i, kind, "i" * fields, False) for i, (kind, fields) in enumerate(COMPACT_MESSAGES)]
_COMPACT_TASK = {c.name: c for c in _COMPACT_BY_CODE[:len(COMPACT_TASKS)]}
_COMPACT_MESSAGE = {c.name: c for c in _COMPACT_BY_CODE[len(COMPACT_TASKS):]}
_COMPACT_MAX = max(codec.struct.size for codec in _COMPACT_BY_CODE) - 4
_KERNEL_CODECS = [_KernelLaunch(len(_COMPACT_BY_CODE) + i, op) for i, op in enumerate(("kernel", "native_kernel"))]
_COMPACT_TASK.update((codec.name, codec) for codec in _KERNEL_CODECS)


def encode_task(slot: int, seq: int, op: str, args: tuple) -> bytes:
    """The frame of a stream task: compact when its op and arguments allow, else pickled."""
    codec = _COMPACT_TASK.get(op)
    if codec is not None:
        try:
            frame = codec.encode(slot, seq, args)
        except (struct.error, ValueError, TypeError):     # a value out of its field's range, a wrong count or shape
            frame = None
        if frame is not None:
            return frame
    return encode(("t", slot, seq, op, args))


def encode_message(message: tuple) -> bytes:
    """The frame of a message: compact when it is one of COMPACT_MESSAGES of ints, else pickled."""
    codec = _COMPACT_MESSAGE.get(message[0])
    if codec is not None:
        try:
            frame = codec.encode(message)
        except (struct.error, ValueError):
            frame = None
        if frame is not None:
            return frame
    return encode(message)


# per code: the frame's size with its length word (None: its own, a kernel launch's), and the
# decoder of the frame at a position
_COMPACT_DECODE = [(codec.struct.size, codec.decode) for codec in _COMPACT_BY_CODE] + \
    [(None, codec.decode) for codec in _KERNEL_CODECS]


class PeerBuffers:
    """Bytes of partial frames buffered per peer process, across all its connections: one
    process opening many connections gets no more memory of its receiver than one does."""

    def __init__(self, limit: int = MAX_FRAME) -> None:
        self.limit = limit
        self.held: dict[int, int] = {}      # pid -> bytes

    def change(self, pid: int, delta: int) -> int:
        held = self.held[pid] = self.held.get(pid, 0) + delta
        if not held:
            del self.held[pid]
        return held


class Decoder:
    """Splits a byte stream into messages.

    A receiver of frames from any holder of the secret (a supervisor, a device) gives the
    ``shapes`` it serves: its pickled frames are decoded by mdev.frameshape (bounded, then
    checked against the tag's shape) and only compact frames of a served tag are taken.
    Without (a host reading its board's replies) they are unpickled, as data only.
    ``buffers`` and ``pid`` count the partial frames it holds against the peer's limit.
    """

    def __init__(self, shapes: Shapes | None = None, max_frame: int = MAX_FRAME,
                 buffers: PeerBuffers | None = None, pid: int = 0) -> None:
        self._buf = bytearray()
        self._scratch = bytearray()
        self._shapes = shapes
        self._max_frame = max_frame
        self._buffers, self._pid, self._counted = buffers, pid, 0
        # per first byte of a compact frame: (size, decode) of a kind served here, else None
        served = [shapes is None or ("t" if i < len(COMPACT_TASKS) else c.name) in shapes.tags
                  for i, c in enumerate(_COMPACT_BY_CODE)] + [shapes is None or "t" in shapes.tags] * len(_KERNEL_CODECS)
        self._compact = [entry if ok else None for entry, ok in zip(_COMPACT_DECODE, served)]
        self._compact += [None] * (256 - len(self._compact))
        self.refused = ""        # why the stream was refused (FrameError), for its receiver's log

    def read(self, sock: socket.socket, size: int, flags: int = 0) -> int:
        """Receive up to ``size`` bytes of ``sock`` into the decoder (0: the peer closed it).

        Into a buffer kept from call to call: ``sock.recv(size)`` allocates ``size`` bytes
        each time, and past malloc's mmap threshold (128 KiB) that is an mmap, page faults
        and an munmap per call -- about 12 us, more than the rest of a small task costs.
        """
        if len(self._scratch) != size:
            self._scratch = bytearray(size)
        n = sock.recv_into(self._scratch, 0, flags)
        self._buf += memoryview(self._scratch)[:n]
        return n

    def messages(self) -> list:
        """The complete messages buffered so far (FrameError on a frame no peer should send)."""
        return self.feed(b"")

    def close(self) -> None:
        """Its connection is gone: what it buffered no longer counts against its peer."""
        if self._buffers is not None and self._counted:
            self._buffers.change(self._pid, -self._counted)
        self._counted = 0
        self._buf = bytearray()

    def feed(self, data: bytes) -> list:
        buf = self._buf
        buf += data
        out = []
        pos = 0
        end = len(buf)
        length, compact = _LEN.unpack_from, self._compact
        # a burst of small tasks is thousands of compact frames: their decoding stays in this loop
        while end - pos >= 4:
            (n,) = length(buf, pos)
            if n & COMPACT:
                n &= ~COMPACT
                if n > _COMPACT_MAX:        # only a kernel launch's frame is longer
                    if n > self._max_frame:
                        raise FrameError(f"a frame of {n} bytes announced; at most {self._max_frame}")
                    if end - pos < 5:
                        break
                    entry = compact[buf[pos + 4]]
                    if entry is None or entry[0] is not None:
                        raise FrameError(f"a compact task frame of {n} bytes announced")
                if end - pos - 4 < n:
                    break
                entry = compact[buf[pos + 4] if n else 255]
                if entry is None:
                    raise FrameError("a compact frame of a kind not served here")
                size, decode = entry
                if size is None:            # a kernel launch: a frame of its own length
                    out.append(decode(buf, pos, n))
                    pos += 4 + n
                    continue
                if size != n + 4:
                    raise FrameError(f"a compact frame of {n} bytes, not {size - 4}")
                out.append(decode(buf, pos))
                pos += size
                continue
            if n > self._max_frame:
                raise FrameError(f"a frame of {n} bytes announced; at most {self._max_frame}")
            if end - pos - 4 < n:
                break
            out.append(self._message(buf[pos + 4:pos + 4 + n]))
            pos += 4 + n
        del buf[:pos]
        if self._buffers is not None and len(buf) != self._counted:
            held = self._buffers.change(self._pid, len(buf) - self._counted)
            self._counted = len(buf)
            if held > self._buffers.limit:
                raise FrameError(f"process {self._pid} has {held} bytes of partial frames buffered; "
                                 f"at most {self._buffers.limit}")
        return out

    def _message(self, payload: bytearray) -> tuple:
        if self._shapes is not None:
            message = frameshape.decode(payload)
            self._shapes.check(message)
            return message
        try:
            message = _DataUnpickler(io.BytesIO(payload)).load()
        except Exception as exc:
            raise FrameError(f"an undecodable frame ({type(exc).__name__}: {str(exc)[:200]})") from None
        if not isinstance(message, tuple) or not message or not isinstance(message[0], str):
            raise FrameError(f"not a message: {frameshape.describe(message)}")
        return message


_CRED = struct.Struct("3i")       # struct ucred: pid, uid, gid


def peer_credentials(sock: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process that connected ``sock`` (AF_UNIX), as the kernel saw it."""
    return _CRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size))


def seal(key: bytes, *fields: int | str) -> str:
    """A token binding ``fields`` (ints of at most 64 bits and strings) that only holders of
    ``key`` can make (TypeError for any other field: a peer's value is never formatted)."""
    for field in fields:
        if not (type(field) is str or (type(field) is int and -1 << 64 < field < 1 << 64)):
            raise TypeError(f"a seal binds ints of 64 bits and strings, not {frameshape.describe(field)}")
    return hmac.new(key, repr(fields).encode(), hashlib.sha256).hexdigest()


def sealed(key: bytes, token, *fields) -> bool:
    """``token`` is the seal of ``fields`` under ``key``."""
    try:
        expected = seal(key, *fields)
    except TypeError:
        return False
    # compare_digest refuses a str of non-ASCII characters (TypeError)
    return isinstance(token, str) and token.isascii() and hmac.compare_digest(token, expected)


class Admission:
    """The handshakes of a listener's new connections, each in a short-lived thread of its
    own: a peer that connects and then says nothing (or trickles) holds up nobody, and the
    serving loop only ever sees connections that proved they hold the secret.

        serving loop --listener readable--> admit() --thread--> handshake
        serving loop <--waker readable-- admitted() <--queue-- authenticated sockets

    A handshake still running after HANDSHAKE_TIMEOUT has its socket shut down by
    ``expire`` (SO_RCVTIMEO alone bounds each read, not a peer sending a byte at a time);
    past MAX_HANDSHAKES at once a new connection is closed unheard, and so is one from a
    process of another user (only root could have reached the 0600 socket).
    """

    def __init__(self, listener: socket.socket, authkey: bytes) -> None:
        self.listener = listener
        self._authkey = authkey
        self.waker, self._wake = socket.socketpair()
        self.waker.setblocking(False)
        self._lock = threading.Lock()
        self._pending: dict[socket.socket, float] = {}    # handshaking -> its deadline
        self._ready: collections.deque[socket.socket] = collections.deque()

    def admit(self) -> None:
        """Take the connection waiting on the listener (call when it is readable)."""
        try:
            sock, _ = self.listener.accept()
        except OSError:
            return          # the peer gave up already
        try:
            uid = peer_credentials(sock)[1]
        except OSError:
            uid = -1
        if uid != os.getuid():
            sock.close()
            return
        with self._lock:
            if len(self._pending) >= MAX_HANDSHAKES:
                sock.close()
                return
            self._pending[sock] = time.monotonic() + HANDSHAKE_TIMEOUT
        threading.Thread(target=self._handshake, args=(sock,), name="handshake", daemon=True).start()

    def _handshake(self, sock: socket.socket) -> None:
        try:
            handshake(sock, self._authkey, server=True, timeout=HANDSHAKE_TIMEOUT)
            ok = True
        except Exception:
            ok = False
        with self._lock:
            self._pending.pop(sock, None)
            if ok:
                self._ready.append(sock)
        if not ok:
            sock.close()
            return
        try:
            self._wake.send(b"\0")
        except OSError:
            pass            # closed: the loop is gone, its close() takes the socket

    def admitted(self) -> list[socket.socket]:
        """The connections authenticated since the last call (call when ``waker`` is readable)."""
        try:
            while self.waker.recv(4096):
                pass
        except (BlockingIOError, InterruptedError):
            pass
        with self._lock:
            ready, self._ready = list(self._ready), collections.deque()
        return ready

    def holds(self, pid: int) -> bool:
        """A connection of process ``pid`` is handshaking, or authenticated and not yet taken."""
        with self._lock:
            socks = list(self._pending) + list(self._ready)
        for sock in socks:
            try:
                if peer_credentials(sock)[0] == pid:
                    return True
            except OSError:
                pass        # closed meanwhile
        return False

    def quiet(self) -> bool:
        """No connection is waiting on the listener, handshaking, or authenticated but not
        yet taken by the serving loop (a supervisor going idle would cut such a client off)."""
        with self._lock:
            if self._pending or self._ready:
                return False
        return not select.select([self.listener], [], [], 0)[0]

    def expire(self) -> None:
        """Cut off handshakes past their time (call now and then from the serving loop)."""
        now = time.monotonic()
        with self._lock:
            late = [sock for sock, deadline in self._pending.items() if deadline < now]
        for sock in late:
            try:
                sock.shutdown(socket.SHUT_RDWR)     # its thread's read ends; the thread closes it
            except OSError:
                pass

    def fds(self) -> list[int]:
        """Every descriptor it holds (a process forked from the serving one closes them)."""
        with self._lock:
            socks = list(self._pending) + list(self._ready)
        return [self.waker.fileno(), self._wake.fileno()] + [s.fileno() for s in socks if s.fileno() >= 0]

    def close(self) -> None:
        with self._lock:
            pending, ready = list(self._pending), list(self._ready)
            self._ready.clear()
        for sock in pending:        # their threads close them (closing here could pull the fd
            try:                    # from under a read, and a reused number be read instead)
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for sock in ready:
            sock.close()
        self.waker.close()
        self._wake.close()


def receive(sock: socket.socket, decoder: Decoder, size: int = 1 << 16, flags: int = 0) -> list | None:
    """The messages that are readable on ``sock`` now; None once the peer has closed it
    (or has sent a frame that closes it: FrameError, whose reason is ``decoder.refused``).  With MSG_DONTWAIT in ``flags``,
    BlockingIOError when nothing is there."""
    try:
        if not decoder.read(sock, size, flags):
            return None
        return decoder.messages()
    except BlockingIOError:
        raise
    except OSError:
        return None
    except FrameError as exc:
        decoder.refused = str(exc)
        return None
    except Exception:       # a fault of decoding itself: never the end of the receiver's loop
        decoder.refused = "decoding failed:\n" + traceback.format_exc(limit=8)[-4000:]
        return None


class Channel:
    """Blocking request/response use of one socket (host side, one per thread)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._decoder = Decoder()
        self._pending: list = []

    def send(self, message: tuple) -> None:
        try:
            self.sock.sendall(encode(message))
        except OSError as exc:
            raise ChannelClosed(str(exc)) from exc

    def recv(self, timeout: float | None = None):
        """Next message; raises TimeoutError after ``timeout`` seconds, ChannelClosed on EOF."""
        while not self._pending:
            self.sock.settimeout(timeout)
            try:
                received = self._decoder.read(self.sock, 1 << 16)
            except socket.timeout:
                raise TimeoutError from None
            except OSError as exc:
                raise ChannelClosed(str(exc)) from exc
            finally:
                self.sock.settimeout(None)
            if not received:
                raise ChannelClosed("connection closed by peer")
            try:
                self._pending.extend(self._decoder.messages())
            except FrameError as exc:
                raise ChannelClosed(str(exc)) from None
        return self._pending.pop(0)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


def connect(path: str, authkey: bytes, hello: tuple) -> Channel:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
        handshake(sock, authkey, server=False)
    except BaseException:
        sock.close()
        raise
    channel = Channel(sock)
    channel.send(hello)
    return channel

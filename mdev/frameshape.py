"""What a frame from a host may decode to, checked before anything formats or uses it.

    frame bytes --decode(payload)--> plain data, bounded while it is built --+
                                                                             v
    message --Shapes.check--> a tag its receiver serves, fields of the types and lengths
                              the tag allows --> the serving loop (supervisor, device)
        |
        +--> FrameError with a bounded description: the connection is closed

``decode`` reads the pickle opcodes that Python's pickler writes for plain data (protocol 4
and 5), and no other, building the objects itself: the C unpickler trusts its input in ways a
peer can abuse (a 9-byte frame that makes it allocate gigabytes of memo, a dict key nested a
million deep whose hash overflows the C stack, thousands of int keys of one hash).  As it
builds, it bounds what each container may hold: nesting depth, the number of elements reached
through shared references as well as direct ones (a 167-byte frame can otherwise describe
2**23 paths), the magnitude of ints, the kind of dict keys and set members, and the number of
keys whose hash a sender can choose.  A container once referenced a second time can no longer
grow, so a frame cannot build a cycle.  Cost is linear in the frame's length.

Hosts read their own board's replies with the C unpickler (mdev.protocol): this module is for
the receivers of frames from any holder of the board's secret.
"""

from __future__ import annotations

import struct

# A message's containers nest at most this deep (mdev's own go a handful of levels).
MAX_DEPTH = 48
# ints take at most this many bytes (1024 bits, 309 digits): addresses and sizes take 8, a
# user's out-of-range value more and is its handler's to refuse; a 5000-digit int could not
# even be formatted (the interpreter refuses past 4300 digits)
MAX_INT_BYTES = 128
# elements reachable from a message, counting each path through shared containers: at most
# ELEMENTS_PER_BYTE per byte of the frame (a reference to a shared tuple costs 2 bytes), and
# never more than MAX_ELEMENTS; what walks a message walks no more than that
ELEMENTS_PER_BYTE = 64
MAX_ELEMENTS = 1 << 22
# dict keys and set members whose hash the sender chooses (ints, floats, tuples: str and bytes
# hashes are keyed per process); keys of one hash cost quadratic time to insert
MAX_CHOSEN_HASHES = 1024
# a dict key or set member that is a tuple nests at most this deep (hashing one recurses)
MAX_KEY_DEPTH = 4
# values waiting on the decoder's stack when a container is started: the pickler keeps at most
# a thousand per level (a tuple's items wait until it is made), a frame nesting a hundred
# thousand containers would keep them all
MAX_WAITING = 1 << 14


class FrameError(ValueError):
    """A frame no well-behaved peer sends (over its size limit, or not a message its
    receiver serves): the connection it came on is closed."""


_ATOMS = frozenset({str, bytes, bytearray, int, float, bool, type(None)})
_KEY_ATOMS = frozenset({str, bytes, int, float, bool, type(None)})
_SALTED = frozenset({str, bytes})            # hash keyed per process: no chosen collisions
_MUTABLE = frozenset({list, dict, set})

_U2, _I4, _U4, _U8, _F8 = (struct.Struct(f).unpack_from for f in ("<H", "<i", "<I", "<Q", ">d"))

# opcodes that would name a class or a function (refused as such, whatever their operands)
_NAMING = frozenset(b"ci\x93\x81\x92Ro\x82\x83\x84bPQ")


def describe(value) -> str:
    """A few words about ``value``, never its repr (which may be huge, or fail)."""
    kind = type(value).__name__
    if isinstance(value, (str, bytes, bytearray, tuple, list, dict, set, frozenset)):
        return f"a {kind} of {len(value)}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"an int of {value.bit_length()} bits"
    return f"a {kind}"


# Bookkeeping of the containers one frame builds.  ``info`` maps each container's id (every
# object stays alive until the frame is decoded, so ids are unique) to (elements reached
# through it, nesting depth); a container not in it holds at most _FEW atoms and counts as
# _LEAF (an undercount by a bounded factor).  ``shared`` holds the mutable containers
# referenced again from the memo: they may no longer grow.
_FEW = 8
_LEAF = (1, 1)


def _measure(items, info: dict, budget: int) -> tuple[int, int]:
    """(elements, depth) of a container holding ``items``, some of them containers (one of
    atoms only is (len + 1, 1), and callers see that at C speed)."""
    count, depth = 1, 0
    for item in items:
        if type(item) in _ATOMS:
            count += 1
        else:
            c, d = info.get(id(item), _LEAF)
            count += c
            if d > depth:
                depth = d
    if depth >= MAX_DEPTH:
        raise FrameError(f"containers nested more than {MAX_DEPTH} deep")
    if count > budget:
        raise FrameError(f"more than {budget} elements (shared references counted per use)")
    return count, depth + 1


def _book(value, info: dict, budget: int) -> None:
    """Note a tuple or frozenset just made, unless it is a few atoms (counted as _LEAF)."""
    if _ATOMS.issuperset(map(type, value)):
        if len(value) > _FEW:       # no more than the frame's bytes: within the budget
            info[id(value)] = (len(value) + 1, 1)
    else:
        info[id(value)] = _measure(value, info, budget)


def _grow(container, items, info: dict, shared: set, budget: int) -> None:
    """``items`` are added to ``container`` (a list, dict or set still being built)."""
    key = id(container)
    if key in shared:
        raise FrameError("a container grows after it was referenced again")
    count, depth = info.get(key, _LEAF)
    c, d = (len(items) + 1, 1) if _ATOMS.issuperset(map(type, items)) else _measure(items, info, budget)
    count += c - 1
    if count > budget:
        raise FrameError(f"more than {budget} elements (shared references counted per use)")
    info[key] = (count, max(depth, d))


def _hashed(keys, info: dict) -> int:
    """How many of ``keys``, which become dict keys or set members, have a hash the sender
    chooses (FrameError unless each is an atom or a shallow tuple)."""
    chosen = 0
    for key in keys:
        t = type(key)
        if t in _SALTED:
            continue
        if t is tuple:
            if info.get(id(key), _LEAF)[1] > MAX_KEY_DEPTH:
                raise FrameError(f"a dict key or set member nested more than {MAX_KEY_DEPTH} deep")
        elif t not in _KEY_ATOMS:
            raise FrameError(f"{describe(key)} as a dict key or set member")
        chosen += 1
    return chosen


def decode(data: bytes):
    """The plain data a pickled frame payload describes (FrameError if it is anything else,
    or exceeds a bound; see the module's docstring)."""
    try:
        return _decode(data)
    except FrameError:
        raise
    except (IndexError, struct.error):
        raise FrameError("a truncated frame") from None
    except (KeyError, UnicodeDecodeError, ValueError, TypeError) as exc:
        raise FrameError(f"an undecodable frame ({type(exc).__name__})") from None


def _receiver(stack: list, at: int):
    """The container below the items from ``at`` on (never one of them: a list given
    itself would be a cycle)."""
    if at < 1:
        raise FrameError("items added to nothing")
    return stack[at - 1]


def _decode(data: bytes):
    budget = ELEMENTS_PER_BYTE * len(data) + 4096
    if budget > MAX_ELEMENTS:
        budget = MAX_ELEMENTS
    info: dict[int, tuple[int, int]] = {}
    shared: set[int] = set()
    chosen = 0
    stack: list = []
    push, pop = stack.append, stack.pop
    marks: list[int] = []
    memo: list = []
    remember = memo.append
    pos, end = 0, len(data)
    if end > 2 and data[0] == 0x80:          # PROTO 4 or 5, then a FRAME: the pickler's prologue
        if data[1] < 4:
            raise FrameError("a frame of pickle protocol 0 to 3")
        pos = 11 if data[2] == 0x95 else 2
    # opcodes by how often mdev's messages use them
    while True:
        op = data[pos]
        pos += 1
        if op == 0x94:                                   # MEMOIZE
            remember(stack[-1])
        elif op == 0x4b:                                 # BININT1
            push(data[pos])
            pos += 1
        elif op == 0x8c:                                 # SHORT_BINUNICODE
            n = data[pos]
            pos += 1
            if n > end - pos:
                raise FrameError("a truncated frame")
            push(str(data[pos:pos + n], "utf-8", "surrogatepass"))
            pos += n
        elif op == 0x28:                                 # MARK
            if len(stack) > MAX_WAITING:
                raise FrameError(f"more than {MAX_WAITING} values waiting for their container")
            marks.append(len(stack))
        elif op == 0x86:                                 # TUPLE2
            b = pop()
            value = (pop(), b)
            if type(b) not in _ATOMS or type(value[0]) not in _ATOMS:
                info[id(value)] = _measure(value, info, budget)
            push(value)
        elif op == 0x87:                                 # TUPLE3
            c = pop()
            b = pop()
            value = (pop(), b, c)
            if type(c) not in _ATOMS or type(b) not in _ATOMS or type(value[0]) not in _ATOMS:
                info[id(value)] = _measure(value, info, budget)
            push(value)
        elif op == 0x74 or op == 0x85:                   # TUPLE, TUPLE1
            at = marks.pop() if op == 0x74 else len(stack) - 1
            if at < 0:
                raise FrameError("a tuple of more items than were sent")
            value = tuple(stack[at:])
            del stack[at:]
            _book(value, info, budget)
            push(value)
        elif op == 0x68 or op == 0x6a:                   # BINGET, LONG_BINGET
            if op == 0x68:
                index = data[pos]
                pos += 1
            else:
                index = _U4(data, pos)[0]
                pos += 4
            if index >= len(memo):
                raise FrameError("a reference to nothing")
            value = memo[index]
            if type(value) in _MUTABLE:
                shared.add(id(value))
            push(value)
        elif op == 0x29:                                 # EMPTY_TUPLE
            push(())
        elif op == 0x4e:                                 # NONE
            push(None)
        elif op == 0x2e:                                 # STOP
            if len(stack) != 1 or marks or pos != end:
                raise FrameError("a frame that is not one value")
            return stack[0]
        elif op == 0x4d:                                 # BININT2
            push(_U2(data, pos)[0])
            pos += 2
        elif op == 0x4a:                                 # BININT
            push(_I4(data, pos)[0])
            pos += 4
        elif op == 0x5d:                                 # EMPTY_LIST
            if len(stack) > MAX_WAITING:
                raise FrameError(f"more than {MAX_WAITING} values waiting for their container")
            push([])
        elif op == 0x65 or op == 0x61:                   # APPENDS, APPEND
            at = marks.pop() if op == 0x65 else len(stack) - 1
            target = _receiver(stack, at)
            if type(target) is not list:
                raise FrameError(f"items appended to {describe(target)}")
            items = stack[at:]
            del stack[at:]
            _grow(target, items, info, shared, budget)
            target.extend(items)
        elif op == 0x7d:                                 # EMPTY_DICT
            if len(stack) > MAX_WAITING:
                raise FrameError(f"more than {MAX_WAITING} values waiting for their container")
            push({})
        elif op == 0x75 or op == 0x73:                   # SETITEMS, SETITEM
            at = marks.pop() if op == 0x75 else len(stack) - 2
            target = _receiver(stack, at)
            items = stack[at:]
            if type(target) is not dict or len(items) % 2:
                raise FrameError(f"dict items given to {describe(target)}")
            del stack[at:]
            _grow(target, items, info, shared, budget)
            chosen += _hashed(items[::2], info)
            if chosen > MAX_CHOSEN_HASHES:
                raise FrameError(f"more than {MAX_CHOSEN_HASHES} dict keys or set members that are not strings")
            for i in range(0, len(items), 2):
                target[items[i]] = items[i + 1]
        elif op == 0x88 or op == 0x89:                   # NEWTRUE, NEWFALSE
            push(op == 0x88)
        elif op == 0x47:                                 # BINFLOAT
            push(_F8(data, pos)[0])
            pos += 8
        elif op == 0x8a or op == 0x8b:                   # LONG1, LONG4
            if op == 0x8a:
                n = data[pos]
                pos += 1
            else:
                n = _I4(data, pos)[0]
                pos += 4
            if not 0 <= n <= MAX_INT_BYTES:
                raise FrameError(f"an int of {n} bytes; at most {MAX_INT_BYTES}")
            if n > end - pos:
                raise FrameError("a truncated frame")
            push(int.from_bytes(data[pos:pos + n], "little", signed=True))
            pos += n
        elif op in (0x43, 0x42, 0x8e, 0x96, 0x58, 0x8d):
            # SHORT_BINBYTES, BINBYTES, BINBYTES8, BYTEARRAY8; BINUNICODE, BINUNICODE8
            if op == 0x43:
                n, pos = data[pos], pos + 1
            elif op == 0x42 or op == 0x58:
                n, pos = _U4(data, pos)[0], pos + 4
            else:
                n, pos = _U8(data, pos)[0], pos + 8
            if n > end - pos:
                raise FrameError("a truncated frame")
            chunk = data[pos:pos + n]
            pos += n
            if op == 0x96:
                push(bytearray(chunk))
            elif op == 0x58 or op == 0x8d:
                push(str(chunk, "utf-8", "surrogatepass"))
            else:
                push(bytes(chunk))
        elif op == 0x8f:                                 # EMPTY_SET
            if len(stack) > MAX_WAITING:
                raise FrameError(f"more than {MAX_WAITING} values waiting for their container")
            push(set())
        elif op == 0x90 or op == 0x91:                   # ADDITEMS, FROZENSET
            at = marks.pop()
            items = stack[at:]
            del stack[at:]
            chosen += _hashed(items, info)
            if chosen > MAX_CHOSEN_HASHES:
                raise FrameError(f"more than {MAX_CHOSEN_HASHES} dict keys or set members that are not strings")
            if op == 0x91:
                value = frozenset(items)
                _book(value, info, budget)
                push(value)
            else:
                target = _receiver(stack, at)
                if type(target) is not set:
                    raise FrameError(f"set members given to {describe(target)}")
                _grow(target, items, info, shared, budget)
                target.update(items)
        elif op == 0x95:                                 # FRAME: a length hint
            pos += 8
        elif op == 0x80:                                 # PROTO
            if data[pos] < 4:
                raise FrameError("a frame of pickle protocol 0 to 3")
            pos += 1
        elif op in _NAMING:
            raise FrameError("a frame names a class or a function; frames carry data only")
        else:
            raise FrameError(f"pickle opcode {op:#04x}, which mdev never sends")


# ---------------------------------------------------------------------------- message shapes
# A field's kind in a message shape: "i" an int of 64 bits, "n" any int decode allows (a
# value a user chose, its handler's to check), "s" a str of at most 256 characters, "S" a str
# of at most 64 KiB, "T" a tuple (its contents are its handler's to check).
_KINDS = {"i": (int, 1 << 63), "n": (int, None), "s": (str, 256), "S": (str, 64 << 10), "T": (tuple, None)}


class Shapes:
    """The messages a receiver serves: tag -> the kinds of its fields after the tag (see
    _KINDS), e.g. ``Shapes({"r": "isT"})`` for ("r", req, op, args)."""

    def __init__(self, shapes: dict[str, str]) -> None:
        self.tags = frozenset(shapes)
        # per tag: its length, the type of each field, and (index, is an int, limit) of each bounded one
        self._shapes = {tag: (len(kinds) + 1, (str,) + tuple(_KINDS[k][0] for k in kinds),
                              tuple((i + 1, k == "i", _KINDS[k][1]) for i, k in enumerate(kinds)
                                    if _KINDS[k][1] is not None))
                        for tag, kinds in shapes.items()}

    def check(self, message) -> None:
        """FrameError unless ``message`` is a tuple of a served tag with fields of its shape."""
        if type(message) is not tuple or not message or type(message[0]) is not str:
            raise FrameError(f"not a message: {describe(message)}")
        shape = self._shapes.get(message[0])
        if shape is None:
            raise FrameError(f"a message of a tag not served here ({describe(message[0])})")
        length, types, bounded = shape
        if len(message) != length or tuple(map(type, message)) != types:
            raise FrameError(f"a {message[0]!r} message of the wrong shape")
        for i, is_int, limit in bounded:
            value = message[i]
            if (not -limit <= value < limit) if is_int else len(value) > limit:
                raise FrameError(f"a {message[0]!r} message with field {i} out of range ({describe(value)})")

"""The two ends of a scoring worker's socket (:mod:`dapo.rewards.worker` runs in the worker,
:mod:`dapo.rewards.pool` is the parent). A message travels as its pickle's length
(:data:`HEADER`), then the pickle. The worker reads and writes whole messages, waiting
(:func:`send_message`, :func:`receive_message`); the parent never blocks (:class:`Channel`)."""

from __future__ import annotations

import pickle
import socket
import struct
from collections.abc import Iterator
from typing import Any

HEADER = struct.Struct("!Q")  # a message's length, before its pickle, on a worker's socket
_READ_BYTES = 1 << 20
_MAX_MESSAGE_BYTES = 1 << 30  # a longer one is garbage (a process a function forked wrote there)


def send_message(sock: socket.socket, message: object) -> None:
    """Write one message, however long the other end takes to read it: the worker's side (the
    parent, which must not wait, sends through a :class:`Channel`)."""
    data = pickle.dumps(message)
    sock.sendall(b"".join((HEADER.pack(len(data)), data)))  # (one write: the parent wakes once)


def receive_message(sock: socket.socket) -> Any:
    """Read one message, waiting for it: the worker's side. EOFError once the other end closed."""
    (size,) = HEADER.unpack(_read_exactly(sock, HEADER.size))
    return pickle.loads(_read_exactly(sock, size))


def _read_exactly(sock: socket.socket, size: int) -> bytearray:
    data = bytearray(size)
    view, got = memoryview(data), 0
    while got < size:
        received = sock.recv_into(view[got:])
        if not received:
            raise EOFError("the other end of the socket closed")
        got += received
    return data


class Channel:
    """The parent's end of a worker's socket, which never blocks (see :mod:`dapo.rewards.pool`):
    what it sends is queued and written as the worker takes it; what arrives is kept until a
    whole message is there."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self.sock = sock
        self.inbox = bytearray()  # what arrived of messages not yet whole
        self.outbox: bytes | memoryview = b""  # what the worker has not taken yet
        self.closed = False  # the worker's end closed (it exited or was killed), or this one

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, message: object) -> None:
        """Queue ``message`` and write what the socket takes now (a closed end: ``closed``)."""
        data = pickle.dumps(message)
        self.outbox = b"".join((self.outbox, HEADER.pack(len(data)), data))
        self.flush()

    def flush(self) -> None:
        while self.outbox and not self.closed:
            try:
                sent = self.sock.send(self.outbox)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # EPIPE, ECONNRESET: the worker is gone
                self.closed, self.outbox = True, b""
                return
            self.outbox = memoryview(self.outbox)[sent:]

    def receive(self) -> Iterator[Any]:
        """Each whole message that has arrived, in order; the end of the stream sets ``closed``.
        (At most 64 reads a call: a process flooding the socket does not keep the parent here.)"""
        for _ in range(64):
            try:
                data = self.sock.recv(_READ_BYTES)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                data = b""
            if not data:
                self.closed = True
                break
            self.inbox += data
        while len(self.inbox) >= HEADER.size:
            (size,) = HEADER.unpack_from(self.inbox)
            if size > _MAX_MESSAGE_BYTES:  # not waited for, growing the inbox all the while
                raise ValueError(f"a message of {size} bytes announced on a worker's socket")
            if len(self.inbox) < HEADER.size + size:
                break
            message = self.inbox[HEADER.size : HEADER.size + size]
            del self.inbox[: HEADER.size + size]
            yield pickle.loads(message)

    def close(self) -> None:
        self.closed = True
        self.sock.close()

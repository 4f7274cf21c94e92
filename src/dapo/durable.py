"""Writing files that survive a crash: flushed to disk before the rename that publishes them."""

from __future__ import annotations

import errno
import os
from pathlib import Path


def write_atomically(path: Path, content: str | bytes) -> None:
    """Replace ``path`` with ``content`` (text, or bytes: a rendered figure): written to a
    temporary file, fsynced, then renamed."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb" if isinstance(content, bytes) else "w") as handle:
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:  # a full disk, a Ctrl-C: no half-written temporary file left behind
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def current_umask() -> int:
    """The process's umask, read without changing it where Linux reports it (a swap elsewhere)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def modes_as_umask(root: Path) -> None:
    """Give ``root``, and every file and directory under it, the mode a plain ``open`` or ``mkdir``
    would have (0666 or 0777 less the umask). Why: safetensors writes its files 0600 (through a
    temporary file) and ``tempfile.mkdtemp`` makes 0700 directories, which would lock a checkpoint
    or a cached model away from the group that shares the run directory (a team on a cluster, a
    serving job under another user) though every other file there is readable."""
    mask = current_umask()
    os.chmod(root, 0o777 & ~mask)
    for directory, subdirectories, files in os.walk(root):
        for name in subdirectories:
            os.chmod(os.path.join(directory, name), 0o777 & ~mask)
        for name in files:
            os.chmod(os.path.join(directory, name), 0o666 & ~mask)


def fsync_tree(root: Path) -> None:
    """fsync every file under ``root`` and every directory, so a rename publishes durable data."""
    for directory, _, files in os.walk(root):
        for name in files:
            with open(os.path.join(directory, name), "rb") as handle:
                os.fsync(handle.fileno())
        fsync_dir(Path(directory))


def fsync_dir(directory: Path) -> None:
    """Flush ``directory``'s entries (a rename in it) to disk. A filesystem that cannot fsync a
    directory (EINVAL or ENOTSUP: some network and FUSE filesystems) flushes nothing here, as the
    rename's durability there is the filesystem's own; any other error is raised."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as error:
        if error.errno not in (errno.EINVAL, errno.ENOTSUP):
            raise
    finally:
        os.close(fd)

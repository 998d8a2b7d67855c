"""Which filesystem holds a path, whether a path is itself a mount point, and free space.

Read from `/proc/self/mountinfo` (the process's own mount namespace, so a container sees its
own mounts). Line format (proc_pid_mountinfo(5)):

    id parent major:minor root mount_point mount_options [optional...] - fstype source super_options

Paths are octal-escaped (`\\040` for a space). Nothing here writes anything.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

MOUNTINFO = "/proc/self/mountinfo"

NETWORK_FS = {
    "nfs",
    "nfs4",
    "cifs",
    "smb3",
    "smbfs",
    "smb",
    "ceph",
    "9p",
    "afs",
    "coda",
    "ncpfs",
    "ocfs2",
    "gfs2",
    "lustre",
    "gpfs",
    "glusterfs",
    "virtiofs",
    "fuseblk",
    "sshfs",
    "davfs",
}
RAM_FS = {"tmpfs", "ramfs"}
LAYER_FS = {"overlay", "overlayfs", "aufs"}

_ESCAPE = re.compile(r"\\([0-7]{3})")


@dataclass(frozen=True)
class Mount:
    """One line of mountinfo."""

    mount_id: int
    parent_id: int
    major: int
    minor: int
    root: str
    mount_point: str
    options: str
    fstype: str
    source: str
    super_options: str


def unescape(text: str) -> str:
    """Undo mountinfo's octal escapes (`\\040` -> space, `\\134` -> backslash)."""
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), text)


def parse_line(line: str) -> Mount | None:
    """A Mount from one mountinfo line, or None for a line that does not parse."""
    fields = line.split()
    try:
        sep = fields.index("-", 6)
        major, minor = fields[2].split(":")
        return Mount(
            mount_id=int(fields[0]),
            parent_id=int(fields[1]),
            major=int(major),
            minor=int(minor),
            root=unescape(fields[3]),
            mount_point=unescape(fields[4]),
            options=fields[5],
            fstype=fields[sep + 1],
            source=unescape(fields[sep + 2]) if len(fields) > sep + 2 else "",
            super_options=fields[sep + 3] if len(fields) > sep + 3 else "",
        )
    except (ValueError, IndexError):
        return None


def read_mounts(path: str = MOUNTINFO) -> list[Mount]:
    """Every mount this process sees; [] when mountinfo cannot be read (not Linux)."""
    try:
        text = Path(path).read_text()
    except OSError:
        return []
    return [m for m in map(parse_line, text.splitlines()) if m is not None]


def _under(path: str, mount_point: str) -> bool:
    return mount_point == "/" or path == mount_point or path.startswith(mount_point + "/")


def _topmost(candidates: list[Mount]) -> Mount:
    """Of mounts stacked on one mount point, the one no other is mounted over."""
    parents = {m.parent_id for m in candidates}
    on_top = [m for m in candidates if m.mount_id not in parents]
    return (on_top or candidates)[-1]


def existing(path: str | os.PathLike) -> str:
    """The real path of `path`, or of its nearest existing ancestor when it does not exist."""
    real = os.path.realpath(path)
    while not os.path.exists(real) and real != "/":
        real = os.path.dirname(real)
    return real


def mount_of(path: str | os.PathLike, mounts: list[Mount] | None = None) -> Mount | None:
    """The mount that holds `path` (or its nearest existing ancestor): mounts with the path's
    st_dev whose mount point is the longest prefix of it, the top-most of a stack. Falls back to
    the longest prefix alone (btrfs subvolumes report another st_dev)."""
    mounts = read_mounts() if mounts is None else mounts
    real = existing(path)
    dev = os.stat(real).st_dev
    prefixed = [m for m in mounts if _under(real, m.mount_point)]
    same_dev = [m for m in prefixed if (m.major, m.minor) == (os.major(dev), os.minor(dev))]
    for pool in (same_dev, prefixed):
        if pool:
            longest = max(len(m.mount_point) for m in pool)
            return _topmost([m for m in pool if len(m.mount_point) == longest])
    return None


def is_mount_point(path: str | os.PathLike, mounts: list[Mount] | None = None) -> bool:
    """True when `path` itself (a file bind mount, say) is where something is mounted."""
    mounts = read_mounts() if mounts is None else mounts
    real = os.path.realpath(path)
    if not os.path.lexists(real):
        return False
    if any(m.mount_point == real for m in mounts):
        return True
    return not mounts and real != "/" and os.path.ismount(real)


def free_bytes(path: str | os.PathLike) -> int:
    """Bytes free for an unprivileged user on the filesystem holding `path` (f_bavail)."""
    st = os.statvfs(existing(path))
    return st.f_bavail * st.f_frsize


def read_only(path: str | os.PathLike) -> bool:
    """True when the filesystem holding `path` is mounted read-only."""
    return bool(os.statvfs(existing(path)).f_flag & os.ST_RDONLY)


def classify(mount: Mount) -> tuple[str, str]:
    """('network'|'ram'|'layer'|'volatile'|'ephemeral'|'local', why) for a mount."""
    fstype = mount.fstype.lower()
    options = set(mount.super_options.split(",")) | set(mount.options.split(","))
    if fstype in NETWORK_FS or fstype.startswith("fuse") or fstype.startswith("nfs"):
        return "network", f"{fstype} is a network or userspace filesystem"
    if fstype in RAM_FS:
        return "ram", f"{fstype} lives in RAM and is lost on reboot"
    if fstype in LAYER_FS:
        if "volatile" in options:
            return "volatile", f"{fstype} mounted volatile skips every fsync"
        return "layer", f"{fstype} is a container's layer, lost with the container"
    if "kubernetes.io~empty-dir" in mount.root:
        return "ephemeral", "a Kubernetes emptyDir, deleted with its pod"
    return "local", f"{fstype} is a local filesystem"


# --- the database file under running processes (issue 17) -------------------------------------

FileId = tuple[int, int]
_FS_IOC_GETFLAGS = 0x80086601  # _IOR('f', 1, long) on 64-bit Linux
_FS_IMMUTABLE_FL = 0x00000010
_FS_APPEND_FL = 0x00000020


def file_id(path: str | os.PathLike) -> FileId | None:
    """(st_dev, st_ino) of the file at `path`, or None when nothing is there. A connection's
    file is gone, or another, when this changes: SQLite keeps the inode it opened, so a
    process whose file was removed would go on writing into a file nobody else can see."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return st.st_dev, st.st_ino


def immutable(path: str | os.PathLike) -> bool:
    """True when `path` carries the immutable or append-only attribute (chattr +i / +a): then
    not even root may write it. False when it cannot be told (no such file, no ioctl)."""
    import array
    import fcntl

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        flags = array.array("l", [0])
        fcntl.ioctl(fd, _FS_IOC_GETFLAGS, flags, True)
        return bool(flags[0] & (_FS_IMMUTABLE_FL | _FS_APPEND_FL))
    except OSError:
        return False
    finally:
        os.close(fd)


def why_unwritable(path: str | os.PathLike) -> str | None:
    """A plain reason why the database at `path` (or its -wal beside it) cannot be written, or
    None when none is visible from here (then SQLite's own error is all there is to say). Read
    only after a write failed: it costs a few system calls."""
    path = os.fspath(path)
    if file_id(path) is None:
        return f"the file {path!r} is not there (removed?)"
    if read_only(path):
        return f"the filesystem holding {path!r} is mounted read-only"
    for name in (path, path + "-wal"):
        if immutable(name):
            return f"{name!r} is immutable (chattr +i); not even root may write it"
        if os.path.exists(name) and not os.access(name, os.W_OK):
            return f"{name!r} is not writable by this user"
    if free_bytes(path) <= 0:
        return f"the disk holding {path!r} is full"
    return None

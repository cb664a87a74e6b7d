"""One writer per home: `bigtrain run` holds an exclusive flock on <home>/.bigtrain.lock.

The file holds the holder's record (pid, host, start time, command, run id) while it runs and is
emptied on release; a run refused before it wrote anything (`keep()` never called) removes a lock
file it created itself, so that the home is left as it found it. A run that opened the file just
before it was removed locks a name no longer in the folder: acquire sees that (the inode at the
path differs) and opens the file again. The kernel drops a flock when its process dies, so a dead holder never blocks
anyone: a run that gets the lock and finds a record left in the file knows the previous holder died
without releasing it (kill -9, power loss) and says so. Readers (`bigtrain lineage`) never take the
lock: they read the record to tell a live run from an abandoned one and never wait.
"""

from __future__ import annotations

import datetime
import errno
import fcntl
import json
import os
import socket
import sys

from components.common.errors import HomeError, HomeLockedError
from components.common.process import process_alive
from runners.local.home import lock_path


def _describe(holder: dict) -> str:
    return (f"pid {holder.get('pid')} on {holder.get('host')}, started {holder.get('started')}, "
            f"command: {holder.get('command')}")


def read_holder(home: str) -> dict | None:
    """The record in the home's lock file (None when empty, absent or unreadable). No locking."""
    try:
        with open(lock_path(home), encoding="utf-8") as fh:
            text = fh.read()
        return json.loads(text) if text.strip() else None
    except (OSError, ValueError):
        return None


def live_writer(home: str) -> bool | None:
    """Whether a live run holds the home: False when the record is empty or its process is dead on
    this host, None when its host is another machine."""
    holder = read_holder(home)
    return False if holder is None else process_alive(holder)


class HomeLock:
    """`with HomeLock(home, record) as lock:` exclusive, non-blocking; lock.stale holds the record
    of a dead previous holder (taken over), if any."""

    def __init__(self, home: str, record: dict):
        self.home, self.path = home, lock_path(home)
        self.record = dict(record, pid=os.getpid(), host=socket.gethostname(),
                           started=datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
                           command=" ".join(sys.argv))
        self.fd: int | None = None
        self.stale: dict | None = None
        self.created = False   # this lock made the file (it did not exist before)
        self.kept = False      # keep(): the run wrote into the home, the file stays on release

    def _open(self) -> int | None:
        """The lock file, opened: created when absent (self.created says so); None when it was
        removed between the two opens."""
        try:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
                self.created = True
                return fd
            except FileExistsError:
                return os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        except OSError as err:
            raise HomeError(f"home {self.home} is not writable: cannot create {self.path}: "
                            f"{err.strerror}") from None

    def _still_the_file(self, fd: int) -> bool:
        """Whether fd is still the file at self.path (a refused run may have removed it)."""
        try:
            return os.fstat(fd).st_ino == os.stat(self.path).st_ino
        except FileNotFoundError:
            return False

    def acquire(self) -> "HomeLock":
        for _ in range(8):  # each retry follows a refused run removing its own lock file
            fd = self._open()
            if fd is None:
                continue
            self._flock(fd)
            if self._still_the_file(fd):
                break
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            self.created = False
        else:
            raise HomeError(f"cannot lock {self.path}: the file was removed 8 times while locking")
        self.fd = fd
        try:
            self._take_over(fd)   # a full disk fails the write: the home left as it was found
        except BaseException:
            self.release()
            raise
        return self

    def _flock(self, fd: int) -> None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            os.close(fd)
            if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise HomeError(f"cannot lock {self.path}: {err.strerror}") from None
            holder = read_holder(self.home) or {}
            alive = process_alive(holder) if holder else None
            extra = (" (that process is gone, but a child of it still holds the lock: end it)"
                     if alive is False else "")
            raise HomeLockedError(f"home {self.home} is in use by another run: {_describe(holder)}"
                                  f"{extra}; wait for it to finish, or use another --home") from None

    def _take_over(self, fd: int) -> None:
        """A record left in the file is a dead holder's (self.stale); then ours is written."""
        previous = os.read(fd, 1 << 16).decode("utf-8", "replace")
        if previous.strip():
            try:
                self.stale = json.loads(previous)
            except ValueError:
                self.stale = {"pid": "?", "host": "?", "started": "?", "command": previous[:200]}
        os.lseek(fd, 0, os.SEEK_SET)
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps(self.record).encode())
        os.fsync(fd)

    def keep(self) -> None:
        """The run writes into the home now: the lock file stays after release (emptied)."""
        self.kept = True

    def stale_note(self) -> str:
        return (f"took over the lock of a run that died without releasing it ({_describe(self.stale)})"
                if self.stale else "")

    def release(self) -> None:
        if self.fd is None:
            return
        try:
            if self.created and not self.kept:   # refused: the home as it was found
                os.remove(self.path)             # while still locked (acquire checks the inode)
            else:
                os.ftruncate(self.fd, 0)  # empty = released cleanly; the file itself stays
        finally:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> "HomeLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()

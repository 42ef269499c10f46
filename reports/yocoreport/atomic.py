"""Atomic file replacement for the report's outputs (issue 12): write to a
temporary file in the target's folder, flush and fsync it, then rename it over
the target, so that an interrupted run or a full disk never leaves a torn
README or figure where a good one stood. A failure removes the temporary file
and raises OSError naming the target."""
import contextlib
import os
import tempfile


@contextlib.contextmanager
def replacing(path, mode="wb", **kw):
    """`with replacing(path, "w", encoding="utf-8") as f: f.write(...)` or a path-taking writer:
    `with replacing(path) as f: fig.savefig(f, ...)`. The target appears only if the block succeeds."""
    folder = os.path.dirname(os.path.abspath(path)) or "."
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, mode, **kw) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and not getattr(exc, "filename", None):
            raise OSError(exc.errno, "%s: %s" % (path, exc.strerror or exc)) from exc
        raise


def check_writable_folder(folder):
    """Creates `folder` if needed and checks that a file can be made in it, before long work;
    OSError naming the folder otherwise."""
    try:
        os.makedirs(folder, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".write-check.", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise OSError(exc.errno, "%s: %s" % (folder, exc.strerror or exc)) from exc

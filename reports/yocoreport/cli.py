"""The command lines' parser (plot.py, report.py, history.py, history_of_repo.py): argparse, but a bad option is
one line on stderr, `PROG: error: MESSAGE (PROG --help lists the options)`, exit 2, without the usage block; an
option that takes a value is refused when given twice (argparse kept the last silently), as the C++ yoco refuses."""
import argparse
import os
import signal
import sys

_GIVEN = "_yoco_options_given"


class _StoreOnce(argparse._StoreAction):
    """argparse's store, refusing the second value of one option (`--db a --db b`: which did the user mean?)."""

    def __call__(self, parser, namespace, values, option_string=None):
        if option_string is not None:
            given = namespace.__dict__.setdefault(_GIVEN, set())
            if self.dest in given:
                raise argparse.ArgumentError(self, "given more than once")
            given.add(self.dest)
        setattr(namespace, self.dest, values)


class ArgumentParser(argparse.ArgumentParser):
    """argparse.ArgumentParser whose errors (an unknown option, a missing value, a bad choice, an option given
    twice) are one line; its subcommands' parsers are of this class too."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register("action", None, _StoreOnce)
        self.register("action", "store", _StoreOnce)

    def parse_known_args(self, args=None, namespace=None):
        namespace, rest = super().parse_known_args(args, namespace)
        namespace.__dict__.pop(_GIVEN, None)
        return namespace, rest

    def error(self, message):
        self.exit(2, "%s: error: %s (%s --help lists the options)\n" % (self.prog, message, self.prog))


class Terminated(BaseException):
    """SIGTERM (`timeout`, a batch system, `kill`), raised as KeyboardInterrupt is for SIGINT: the unwinding
    removes a half-written output's temporary file (yocoreport.atomic), which the default action, the end on the
    spot, left in the output folder."""


def _raise_terminated(signum, frame):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # one is enough: a second must not cut the cleanup short
    raise Terminated()


def run_main(main, prog):
    """sys.exit(main()), ending the way the C++ yoco ends: a reader that stops early (`report.py | head`) ends the
    command by SIGPIPE, quietly, and Ctrl-C by SIGINT (a SIGTERM by SIGTERM) after one line; never a traceback.
    The outputs stay whole either way (yocoreport.atomic: the earlier file or the new one, no temporary file)."""
    # Python turns SIGPIPE into BrokenPipeError, an OSError: report.py took a closed stdout for a figure it could
    # not write (exit 2, no README).
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        sys.exit(main())
    except (KeyboardInterrupt, Terminated) as exc:
        sig = signal.SIGINT if isinstance(exc, KeyboardInterrupt) else signal.SIGTERM
        try:
            sys.stderr.write("\n%s: interrupted (%s)\n" % (prog, sig.name))
            sys.stderr.flush()
        except OSError:
            pass
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)

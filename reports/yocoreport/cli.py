"""The command lines' parser (plot.py, report.py, history.py, history_of_repo.py): argparse, but a bad option is
one line on stderr, `PROG: error: MESSAGE (PROG --help lists the options)`, exit 2, without the usage block."""
import argparse


class ArgumentParser(argparse.ArgumentParser):
    """argparse.ArgumentParser whose errors (an unknown option, a missing value, a bad choice) are one line; its
    subcommands' parsers are of this class too."""

    def error(self, message):
        self.exit(2, "%s: error: %s (%s --help lists the options)\n" % (self.prog, message, self.prog))

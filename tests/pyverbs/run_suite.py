#!/usr/bin/python3
"""rdma-core's own verbs test suite (pyverbs) on mrc0, through the verbs shim.

The suite is the one Debian's python3-pyverbs ships (/usr/share/doc/rdma-core/tests: the
`tests/` directory of rdma-core's release, some files gzipped); nothing is fetched. It is
copied to a temporary directory as the package `tests`, and its generic modules (every
`test_*.py` but the vendor-only mlx5 and EFA ones) run on device mrc0 in a child process
that preloads the shim, with two loopback planes on ephemeral UDP ports of ::1.

Prints one JSON object (also written to --json FILE): run, passed, failed, errors, skipped,
skipped_by_reason ({reason: count}), and the ids of the failed and erroring tests (the
--json file also lists the skipped ones by reason: skipped_tests_by_reason); errors of the
tests in KNOWN_ERRORS are counted apart (known_errors, by reason). Exits 0 when nothing
else failed or erred, 1 otherwise, 2 on bad use (no shim, no suite, no pyverbs).

The suite's huge-page tests (ODP and parent-domain traffic on 2 MiB pages) skip on a host
with none allocated; run as root on such a host, the runner allocates HUGE_PAGES for the run and
gives them back at the end (also on failure), so they run too. --no-huge-pages leaves the host
alone.

Usage: run_suite.py --shim build/lib/libmrc-verbs-shim.so [--json FILE] [--verbose]
                    [--suite DIR] [-k PATTERN ...] [--no-huge-pages]
"""

import argparse
import collections
import fcntl
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

DEFAULT_SUITE = "/usr/share/doc/rdma-core/tests"
# Modules of one vendor's hardware (mlx5 DevX/DV, EFA SRD): not run. Their base modules stay
# (tests/utils.py imports them).
VENDOR_PREFIXES = ("test_mlx5", "test_efa")
# Tests that err on mrc0 for a reason the project knows and has not fixed yet: reported apart
# ("known_errors", by reason) and not failing the run; one that passes is listed under
# "known_now_pass" so it comes off this list. Each entry says why (docs/verbs-shim.md).
KNOWN_ERRORS = {
    # None. (test_rdmacm_async_traffic_external_qp was one until the requester waited the
    # responder's min_rnr_timer after an RNR NAK: its client posts its receive only after its
    # own SEND completed, and under load the server's reply came first.)
}


def fail_usage(msg):
    print(f"run_suite.py: {msg}", file=sys.stderr)
    sys.exit(2)


def copy_suite(src, dst):
    """Copies the suite to dst/tests, gunzipping what Debian compressed."""
    out = os.path.join(dst, "tests")
    os.mkdir(out)
    for name in sorted(os.listdir(src)):
        path = os.path.join(src, name)
        if name.endswith(".py.gz"):
            with gzip.open(path, "rb") as f, open(os.path.join(out, name[:-3]), "wb") as g:
                shutil.copyfileobj(f, g)
        elif name.endswith(".py"):
            shutil.copy(path, out)
    for name in os.listdir(out):
        if name.startswith(VENDOR_PREFIXES):
            os.unlink(os.path.join(out, name))
    if not os.path.exists(os.path.join(out, "__init__.py")):
        fail_usage(f"{src} is not rdma-core's tests/ (no __init__.py)")
    return out


class Recorder(unittest.TextTestResult):
    """Keeps every skip's reason; failures and errors are kept by TestResult itself."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.passed = 0

    def addSuccess(self, test):
        super().addSuccess(test)
        self.passed += 1


def _tests(suite):
    """Every test case of a (nested) unittest suite."""
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from _tests(t)
        else:
            yield t


def child(args):
    """Runs in the process that preloads the shim: loads the suite and runs it."""
    # As run_tests.py: the suite's directory first (its modules import args_parser), the
    # package `tests` from its parent; its own argument parser reads sys.argv (the device).
    sys.path[:0] = [os.path.join(args.workdir, "tests"), args.workdir]
    from args_parser import parser  # noqa: E402

    sys.argv = [sys.argv[0], "--dev", "mrc0"]
    parser.parse_args()
    import tests  # noqa: E402
    loader = unittest.TestLoader()
    if args.k:
        loader.testNamePatterns = [p if "*" in p else f"*{p}*" for p in args.k]
    suite = loader.loadTestsFromModule(tests)
    ran = {t.id() for t in _tests(suite)}  # before the run, which lets go of the tests
    runner = unittest.TextTestRunner(stream=sys.stderr, verbosity=2 if args.verbose else 1,
                                     resultclass=Recorder)
    res = runner.run(suite)
    reasons = collections.Counter(reason for _, reason in res.skipped)
    skipped_tests = collections.defaultdict(list)
    for t, reason in res.skipped:
        skipped_tests[reason].append(t.id())
    errors = [t.id() for t, _ in res.errors if t.id() not in KNOWN_ERRORS]
    known = collections.defaultdict(list)
    for t, _ in res.errors:
        if t.id() in KNOWN_ERRORS:
            known[KNOWN_ERRORS[t.id()]].append(t.id())
    erred = {t.id() for t, _ in res.errors} | {t.id() for t, _ in res.failures}
    skipped_ids = {t.id() for t, _ in res.skipped}
    now_pass = sorted(i for i in KNOWN_ERRORS if i in ran and i not in erred | skipped_ids)
    summary = {
        "suite": args.suite,
        "run": res.testsRun,
        "passed": res.passed,
        "failed": len(res.failures) + len(res.unexpectedSuccesses),
        "errors": len(errors),
        "known_errors": dict(known),
        "known_now_pass": now_pass,
        "skipped": len(res.skipped),
        "skipped_by_reason": dict(reasons.most_common()),
        "failed_tests": [t.id() for t, _ in res.failures] + [t.id() for t in res.unexpectedSuccesses],
        "error_tests": errors,
    }
    text = json.dumps(summary, indent=1)
    if args.json:
        summary["skipped_tests_by_reason"] = skipped_tests
        with open(args.json, "w") as f:
            f.write(json.dumps(summary, indent=1) + "\n")
    print(text)
    return 0 if summary["failed"] == 0 and summary["errors"] == 0 and res.testsRun > 0 else 1


HUGE_PAGES_FILE = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"
HUGE_PAGES = 64  # 128 MiB: the suite's huge-page tests map a few pages each


class HugePages:
    """Allocates HUGE_PAGES 2 MiB pages for the run where the host has none and we may (root),
    and puts the count back on exit; does nothing otherwise (the tests then skip)."""

    def __init__(self, wanted):
        self.before = None
        self.wanted = wanted

    def __enter__(self):
        if not self.wanted or not os.path.isfile(HUGE_PAGES_FILE) or os.geteuid() != 0:
            return self
        with open(HUGE_PAGES_FILE) as f:
            before = int(f.read())
        if before == 0:
            try:
                with open(HUGE_PAGES_FILE, "w") as f:
                    f.write(str(HUGE_PAGES))
                self.before = before
            except OSError as ex:
                print(f"run_suite.py: could not allocate huge pages ({ex}): their tests skip",
                      file=sys.stderr)
        return self

    def __exit__(self, *exc):
        if self.before is not None:
            with open(HUGE_PAGES_FILE, "w") as f:
                f.write(str(self.before))
        return False


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shim", help="libmrc-verbs-shim.so to preload")
    ap.add_argument("--suite", default=DEFAULT_SUITE, help="rdma-core's tests/ directory")
    ap.add_argument("--json", help="also write the summary here")
    ap.add_argument("--verbose", action="store_true", help="one line per test on stderr")
    ap.add_argument("-k", action="append", help="run only tests matching (unittest -k)")
    ap.add_argument("--no-huge-pages", action="store_true",
                    help="do not allocate 2 MiB pages for the run (their tests then skip)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--workdir", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)

    if not args.shim or not os.path.isfile(args.shim):
        fail_usage(f"--shim: no such file: {args.shim!r}")
    if not os.path.isdir(args.suite):
        fail_usage(f"no suite at {args.suite} (install python3-pyverbs: bash scripts/deps.sh)")
    try:
        import pyverbs  # noqa: F401
    except ImportError:
        fail_usage(f"{sys.executable} has no pyverbs module (install python3-pyverbs)")

    # The suite's rdma_cm tests all listen on its fixed port 7471 (rdma-core's default): two
    # runs on one machine at once would take each other's connections. One at a time.
    lock = open(os.path.join(tempfile.gettempdir(), "mrc-pyverbs.lock"), "a")
    fcntl.flock(lock, fcntl.LOCK_EX)
    with tempfile.TemporaryDirectory(prefix="mrc-pyverbs-") as work, \
            HugePages(not args.no_huge_pages):
        copy_suite(args.suite, work)
        env = dict(os.environ)
        env.update({
            "LD_PRELOAD": os.path.abspath(args.shim),
            "MRC_PLANES": "::1,::1",
            # Ephemeral ports: the rdma_cm tests fork two processes that each open mrc0 (the
            # connection manager tells each the other's ports); a process's own QPs find
            # themselves by its own GID.
            "MRC_PORT": "0",
            "MRC_STATS": "0",
            "PYTHONDONTWRITEBYTECODE": "1",
        })
        env.pop("MRC_CONFIG", None)
        cmd = [sys.executable, os.path.abspath(__file__), "--child", "--workdir", work,
               "--suite", args.suite]
        if args.json:
            cmd += ["--json", os.path.abspath(args.json)]
        if args.verbose:
            cmd.append("--verbose")
        for p in args.k or []:
            cmd += ["-k", p]
        sys.stdout.flush()
        return subprocess.run(cmd, env=env, cwd=work).returncode


if __name__ == "__main__":
    sys.exit(main())

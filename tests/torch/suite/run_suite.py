#!/usr/bin/python3
"""Runs torch's own `_DistTestBase` suite (torch.testing._internal.distributed.distributed_test,
as torch's test/distributed/test_distributed_spawn.py runs it) on the weft backend or on gloo,
and prints one line per test: pass, fail or skip, with a one-line reason.

    # the full run (every test, 2 ranks, weft), ~8 min on 2 cores
    PYTHONPATH=build/python /usr/bin/python3 tests/torch/suite/run_suite.py --backend weft -np 2

    # gloo and weft side by side: the table of docs/PYTORCH.md, "Compatibility with gloo"
    PYTHONPATH=build/python /usr/bin/python3 tests/torch/suite/run_suite.py --backend gloo,weft -np 2 \\
        --markdown compat.md --json compat.json

    # against the expectations (what CTest runs): exit 1 when a test's outcome differs from
    # tests/torch/suite/expectations.txt in either direction
    ... run_suite.py --backend weft -np 2 --expect tests/torch/suite/expectations.txt [--shard 1/3] [-k allreduce]

The suite always sees BACKEND=gloo; with --backend weft every group it creates is a weft group
(suite_tests.py says how). The ranks' own output (torch's harness logs a lot) goes to --log.
"""
import argparse
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
OUTCOMES = ("pass", "fail", "skip")


# ---------------------------------------------------------------------------------------------
# expectations.txt:  <test name>  <pass|fail|skip|flaky>  [np=2,3]   # why
def read_expectations(path, world_size):
    """{test: (outcome, why)} for this world size; a test absent from the file must pass."""
    expected = {}
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            body, _, why = line.partition("#")
            fields = body.split()
            if not fields:
                continue
            if len(fields) not in (2, 3) or fields[1] not in OUTCOMES + ("flaky",):
                raise SystemExit(f"{path}:{lineno}: expected '<test> <pass|fail|skip|flaky> [np=N,M]  # why'")
            if len(fields) == 3:
                if not fields[2].startswith("np="):
                    raise SystemExit(f"{path}:{lineno}: the third field must be np=N[,M...]")
                if str(world_size) not in fields[2][3:].split(","):
                    continue
            if fields[0] in expected:
                raise SystemExit(f"{path}:{lineno}: {fields[0]} twice for {world_size} ranks")
            expected[fields[0]] = (fields[1], why.strip())
    return expected


def matches(outcome, expected):
    return expected == "flaky" and outcome in ("pass", "fail") or outcome == expected


# ---------------------------------------------------------------------------------------------
def one_line(text, limit=200):
    text = " ".join(text.split())
    # torch prints sets of backends in hash order: {'gloo', 'nccl'} one run, {'nccl', 'gloo'} the next
    text = re.sub(r"\{('[^{}]*')\}", lambda m: "{" + ", ".join(sorted(m.group(1).split(", "))) + "}", text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def exception_line(block):
    """The final exception of a formatted traceback: the first unindented line after its last
    'Traceback (most recent call last):' and up to two more lines of its message (torch's C++
    stack, if any, follows on later lines)."""
    lines = block.splitlines()
    starts = [i for i, l in enumerate(lines) if l.startswith("Traceback (most recent call last)")]
    if not starts:
        rest = [l for l in lines if l.strip()]
        return rest[-1] if rest else ""
    rest = lines[starts[-1] + 1:]
    for i, line in enumerate(rest):
        if line and not line[0].isspace():
            # and the message's next lines (assertEqual's msg=), up to torch's C++ stack or a blank
            out = [line]
            for more in rest[i + 1:i + 3]:
                if not more.strip() or more.startswith(("Exception raised from", "frame #", "To execute this test")):
                    break
                out.append(more)
            return " ".join(out)
    return lines[-1]


def failure_reason(err):
    m = re.search(r"Process (\d+) exited with error code \d+ and exception:\n", err)
    if m:
        block = err[m.end():]
        nxt = re.search(r"\nProcess \d+ exited with error code", block)
        return f"rank {m.group(1)}: " + exception_line(block[: nxt.start()] if nxt else block)
    m = re.search(r"Process (\d+) terminated or timed out after ([\d.]+) seconds", err)
    if m:
        return f"rank {m.group(1)} timed out or was killed after {float(m.group(2)):.0f} s"
    return exception_line(err)


def run_tests(args, names):
    """Runs `names` in this process; returns [{name, outcome, reason, seconds}]."""
    import unittest

    import suite_tests
    from torch.testing._internal.common_distributed import TEST_SKIPS

    generic = TEST_SKIPS["generic"].message
    notes = os.environ["WEFT_SUITE_NOTES"]
    progress = args.progress

    class Result(unittest.TestResult):
        def __init__(self):
            super().__init__()
            self.rows = []

        def startTest(self, test):
            super().startTest(test)
            self.t0 = time.monotonic()

        def _row(self, test, outcome, reason, detail=""):
            name = test.id().split(".")[-1]
            self.rows.append(dict(name=name, outcome=outcome, reason=one_line(reason),
                                  seconds=round(time.monotonic() - self.t0, 2), detail=detail))
            n = len(self.rows)
            print(f"[{n:3}/{len(names)}] {outcome:4} {self.rows[-1]['seconds']:6.1f}s  {name}"
                  + (f"  ({self.rows[-1]['reason']})" if reason else ""), file=progress, flush=True)

        def addSuccess(self, test):
            super().addSuccess(test)
            self._row(test, "pass", "")

        def addSkip(self, test, reason):
            super().addSkip(test, reason)
            name = test.id().split(".")[-1]
            if reason == generic:
                found = sorted(f for f in os.listdir(notes) if f.startswith(name + ".rank"))
                if found:
                    with open(os.path.join(notes, found[0])) as f:
                        reason = f.read()
            self._row(test, "skip", reason)

        def addError(self, test, err):
            super().addError(test, err)
            text = self.errors[-1][1]
            self._row(test, "fail", failure_reason(text), text)

        def addFailure(self, test, err):
            super().addFailure(test, err)
            text = self.failures[-1][1]
            self._row(test, "fail", failure_reason(text), text)

        def addExpectedFailure(self, test, err):
            super().addExpectedFailure(test, err)
            self._row(test, "fail", "expected failure (torch's own @expectedFailure)")

        def addUnexpectedSuccess(self, test):
            super().addUnexpectedSuccess(test)
            self._row(test, "pass", "unexpected success (torch's own @expectedFailure)")

    suite = unittest.TestSuite(suite_tests.TestDistBackendWithSpawn(n) for n in names)
    result = Result()
    suite.run(result)
    return result.rows


def select(all_names, args):
    names = all_names
    if args.k:
        names = [n for n in names if any(fnmatch.fnmatchcase(n, p) if any(c in p for c in "*?[") else p in n
                                          for p in args.k)]
    if args.exclude:
        names = [n for n in names if not any(fnmatch.fnmatchcase(n, p) if any(c in p for c in "*?[") else p in n
                                              for p in args.exclude)]
    if args.shard:
        k, n = (int(x) for x in args.shard.split("/"))
        if not 1 <= k <= n:
            raise SystemExit("--shard K/N with 1 <= K <= N")
        names = names[k - 1::n]
    return names


def run_one_backend(args):
    """In this process: set the environment the suite reads at import, run, report."""
    os.environ["BACKEND"] = "gloo"  # the suite's gates; suite_tests.py swaps in weft
    os.environ["WEFT_SUITE_BACKEND"] = args.backend
    os.environ["WORLD_SIZE"] = str(args.np)
    os.environ["WEFT_SUITE_START"] = args.start
    os.environ["DISTRIBUTED_TESTS_DEFAULT_TIMEOUT"] = str(args.timeout)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    work = tempfile.mkdtemp(prefix=f"weft-suite-{args.backend}-np{args.np}-")
    os.environ["TEMP_DIR"] = work
    for d in ("barrier", "test_dir", "notes"):
        os.makedirs(os.path.join(work, d), exist_ok=True)
    os.environ["WEFT_SUITE_NOTES"] = os.path.join(work, "notes")
    # torch's run_test.py runs the suite with INIT_METHOD=env:// and again with a file://; the
    # file:// run is the one that opens the tests that re-initialize the default group (each
    # test's setUp then points INIT_METHOD at a fresh file of its own).
    os.environ["INIT_METHOD"] = "file://" + os.path.join(work, "init_file")
    sys.path.insert(0, HERE)  # expecttest.py, suite_tests.py
    os.environ["PYTHONPATH"] = os.pathsep.join([HERE] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    # torch's common_utils parses sys.argv when imported (and the ranks get the parent's argv).
    sys.argv = [sys.argv[0]]

    log_path = args.log or os.path.join(work, "ranks.log")
    progress = os.fdopen(os.dup(1), "w", buffering=1)
    args.progress = progress
    log = open(log_path, "w")
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)

    import suite_tests

    names = select(suite_tests.test_names(), args)
    expected = read_expectations(args.expect, args.np) if args.expect else None
    if expected is not None:
        unknown = sorted(set(expected) - set(suite_tests.test_names()))
        if unknown:
            print(f"{args.expect}: not tests of this torch: {' '.join(unknown)}", file=progress)
            return 2
    print(f"{len(names)} tests of _DistTestBase, backend {args.backend}, {args.np} ranks; "
          f"the ranks' output: {log_path}", file=progress, flush=True)
    t0 = time.monotonic()
    rows = run_tests(args, names)
    wall = time.monotonic() - t0
    sys.stdout.flush()
    sys.stderr.flush()

    counts = {o: sum(r["outcome"] == o for r in rows) for o in OUTCOMES}
    print(f"\n{args.backend}, {args.np} ranks: {counts['pass']} pass, {counts['fail']} fail, "
          f"{counts['skip']} skip, in {wall:.0f} s", file=progress)
    status = 0
    if expected is not None:
        bad = []
        for r in rows:
            want, why = expected.get(r["name"], ("pass", ""))
            if not matches(r["outcome"], want):
                bad.append((r, want, why))
        for r, want, why in bad:
            change = {"pass": "NEWLY PASSES", "fail": "NEWLY FAILS", "skip": "NEWLY SKIPS"}[r["outcome"]]
            print(f"\n{change}: {r['name']}: expected {want}" + (f" ({why})" if why else "")
                  + f", got {r['outcome']}: {r['reason']}", file=progress)
            if r["detail"]:
                print("    " + "\n    ".join(r["detail"].strip().splitlines()[-40:]), file=progress)
        if bad:
            print(f"\n{len(bad)} test(s) differ from {args.expect}: update the code or the expectations "
                  f"(with the reason)", file=progress)
            status = 1
        else:
            print(f"every outcome as {args.expect} expects", file=progress)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(backend=args.backend, world_size=args.np, seconds=round(wall, 1), start=args.start,
                           torch=__import__("torch").__version__,
                           tests=[{k: r[k] for k in ("name", "outcome", "reason", "seconds")} for r in rows]),
                      f, indent=1)
    if args.markdown:
        write_markdown(args.markdown, {args.backend: rows}, args.np,
                       describe({args.backend: dict(backend=args.backend, world_size=args.np, seconds=wall,
                                                    start=args.start, torch=__import__("torch").__version__)}))
    if status == 0 and not args.log:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"the ranks' output: {log_path}", file=progress)
    return status


# ---------------------------------------------------------------------------------------------
# The torch call each test exercises (first match wins), for the table call by call.
CALLS = [
    (r"all_reduce_coalesced", "all_reduce_coalesced"),
    (r"sparse_all_reduce", "all_reduce (sparse)"),
    (r"all_reduce_multigpu", "all_reduce_multigpu"),
    (r"all_reduce", "all_reduce"),
    (r"all_gather_coalesced", "all_gather_coalesced"),
    (r"all_gather_object", "all_gather_object"),
    (r"all_gather_into|all_gather_v", "all_gather_into_tensor"),
    (r"all_gather_multigpu", "all_gather_multigpu"),
    (r"all_gather", "all_gather"),
    (r"all_to_all_single", "all_to_all_single"),
    (r"all_to_all", "all_to_all"),
    (r"reduce_scatter", "reduce_scatter"),
    (r"reduce_multigpu", "reduce_multigpu"),
    (r"^test_reduce_", "reduce"),
    (r"broadcast_object_list", "broadcast_object_list"),
    (r"broadcast_multigpu", "broadcast_multigpu"),
    (r"^test_broadcast", "broadcast"),
    (r"gather_object", "gather_object"),
    (r"^test_gather", "gather"),
    (r"scatter_object_list", "scatter_object_list"),
    (r"^test_scatter", "scatter"),
    (r"batch_isend_irecv", "batch_isend_irecv"),
    (r"send_recv_any_source", "recv without src (any source)"),
    (r"send_recv_nccl", "send / recv (NCCL)"),
    (r"send_recv", "send / recv"),
    (r"^test_i(send|recv)", "isend / irecv"),
    (r"monitored_barrier", "monitored_barrier"),
    (r"barrier_timeout", "barrier, group timeout"),
    (r"barrier", "barrier"),
    (r"nccl", "NCCL only"),
    (r"get_backend|backend_|Backend_enum", "get_backend, Backend"),
    (r"get_future", "Work.get_future"),
    (r"get_rank|destroy|new_subgroups", "new_group, new_subgroups, destroy, get_rank"),
    (r"SyncBatchNorm|sync_bn", "SyncBatchNorm"),
    (r"model_averager|average_parameters|post_localSGD", "model averaging, post-local SGD"),
    (r"DistributedSampler", "DistributedSampler"),
    (r".", "DistributedDataParallel"),
]


def call_of(name):
    return next(call for pattern, call in CALLS if re.search(pattern, name))


def describe(results):
    """One line on how the runs were made, from their --json."""
    parts = [f"{r['backend']}: {r['seconds']:.0f} s" for r in results.values()]
    r = next(iter(results.values()))
    return (f"{r['world_size']} ranks, ranks {'forked' if r.get('start') == 'fork' else 'spawned'}, "
            f"torch {r.get('torch', '?')}; the whole run took " + ", ".join(parts) + ".")


def markdown(by_backend, np_, meta=""):
    """The tables: call by call, the tests whose outcomes differ, and every test."""
    backends = list(by_backend)
    tables = {b: {r["name"]: r for r in rows} for b, rows in by_backend.items()}
    names = sorted(set().union(*tables.values()))
    out = [(meta + " " if meta else f"{np_} ranks. ") + "Each cell: tests passed / failed / skipped.", ""]
    # Call by call.
    calls = {}
    for n in names:
        calls.setdefault(call_of(n), []).append(n)
    out.append("| call | tests | " + " | ".join(backends) + " | differences |")
    out.append("|" + " --- |" * (len(backends) + 3))
    for call, _ in sorted({c: 0 for _, c in CALLS}.items(), key=lambda kv: [c for _, c in CALLS].index(kv[0])):
        if call not in calls:
            continue
        ns = calls[call]
        cells = []
        for b in backends:
            got = [tables[b][n]["outcome"] for n in ns if n in tables[b]]
            cells.append(" / ".join(str(got.count(o)) for o in OUTCOMES))
        diff = [n for n in ns if len({tables[b][n]["outcome"] for b in backends if n in tables[b]}) > 1]
        out.append(f"| {call} | {len(ns)} | " + " | ".join(cells) + " | "
                   + (", ".join(f"`{n[5:]}`" for n in diff) if diff else "") + " |")
    totals = [" / ".join(str(sum(r["outcome"] == o for r in by_backend[b])) for o in OUTCOMES) for b in backends]
    out.append(f"| **all** | {len(names)} | " + " | ".join(f"**{t}**" for t in totals) + " | |")
    # The tests whose outcome differs between the backends, with the reasons.
    if len(backends) > 1:
        diff = [n for n in names if len({tables[b][n]["outcome"] for b in backends if n in tables[b]}) > 1]
        out += ["", "Tests whose outcome differs:", "",
                "| test | " + " | ".join(backends) + " | why |", "|" + " --- |" * (len(backends) + 2)]
        for n in diff:
            why = "; ".join(f"{b}: {tables[b][n]['reason']}".replace("|", "\\|") for b in backends
                            if n in tables[b] and tables[b][n]["outcome"] != "pass" and tables[b][n]["reason"])
            out.append(f"| `{n}` | " + " | ".join(tables[b].get(n, {}).get("outcome", "-") for b in backends)
                       + f" | {why} |")
    # Every test.
    out += ["", "<details><summary>Every test</summary>", "",
            "| test | " + " | ".join(backends) + " | reason |", "|" + " --- |" * (len(backends) + 2)]
    for n in names:
        reasons = []
        for b in backends:
            r = tables[b].get(n)
            if r and r["outcome"] != "pass" and r["reason"]:
                reasons.append((b, r["reason"].replace("|", "\\|")))
        if len(reasons) == len(backends) > 1 and len({t for _, t in reasons}) == 1:
            reasons = [("all", reasons[0][1])]
        reason = "; ".join(f"{b}: {t}" if len(backends) > 1 and b != "all" else t for b, t in reasons)
        out.append(f"| `{n}` | " + " | ".join(tables[b].get(n, {}).get("outcome", "-") for b in backends)
                   + f" | {reason} |")
    out += ["", "</details>"]
    return "\n".join(out) + "\n"


BEGIN, END = "<!-- torch-suite:begin -->", "<!-- torch-suite:end -->"


def write_markdown(path, by_backend, np_, meta=""):
    """Writes the tables to `path`; a file that has the BEGIN/END markers keeps everything else
    (docs/PYTORCH.md is regenerated that way)."""
    text = markdown(by_backend, np_, meta)
    if os.path.exists(path):
        with open(path) as f:
            old = f.read()
        if BEGIN in old and END in old:
            head, rest = old.split(BEGIN, 1)
            text = head + BEGIN + "\n" + text + rest[rest.index(END):]
    with open(path, "w") as f:
        f.write(text)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", default="weft", help="weft, gloo, or gloo,weft (each in turn, side by side)")
    p.add_argument("-np", type=int, default=2, help="ranks (WORLD_SIZE), default 2")
    p.add_argument("-k", action="append", help="only tests whose name contains this (or matches the glob); repeatable")
    p.add_argument("--exclude", action="append", help="leave out tests whose name contains this / matches the glob")
    p.add_argument("--shard", help="K/N: every N-th of the selected tests (sorted by name), from the K-th")
    p.add_argument("--expect", help="expectations file: exit 1 when an outcome differs from it")
    p.add_argument("--timeout", type=int, default=120, help="seconds per test before its ranks are killed (default 120)")
    p.add_argument("--json", help="write the results here")
    p.add_argument("--markdown", help="write a markdown table here (several backends: side by side)")
    p.add_argument("--start", choices=("spawn", "fork"), default="spawn",
                   help="how the ranks start: spawn (as torch's test_distributed_spawn.py; default) or fork (faster)")
    p.add_argument("--log", help="the ranks' output (default: a file in the run's temporary directory)")
    p.add_argument("--list", action="store_true", help="print the selected tests and exit")
    p.add_argument("--table", metavar="JSON", help="run nothing: write --markdown from the --json of an earlier run")
    args = p.parse_args()

    backends = args.backend.split(",")
    for b in backends:
        if b not in ("weft", "gloo"):
            p.error(f"--backend: weft or gloo, not {b}")
    if args.table:
        with open(args.table) as f:
            results = json.load(f)
        if "tests" in results:  # one backend's
            results = {results["backend"]: results}
        first = next(iter(results.values()))
        write_markdown(args.markdown or "/dev/stdout", {b: r["tests"] for b, r in results.items()},
                       first["world_size"], describe(results))
        return 0
    if args.list:
        os.environ.update(BACKEND="gloo", WEFT_SUITE_BACKEND="gloo", WORLD_SIZE=str(args.np),
                          TEMP_DIR=tempfile.gettempdir())
        sys.path.insert(0, HERE)
        sys.argv = [sys.argv[0]]
        import suite_tests
        print("\n".join(select(suite_tests.test_names(), args)))
        return 0
    if len(backends) == 1:
        args.backend = backends[0]
        return run_one_backend(args)

    # Several backends: each in a process of its own, then the side-by-side table.
    status, results = 0, {}
    for b in backends:
        out = tempfile.NamedTemporaryFile(suffix=f"-{b}.json", delete=False).name
        cmd = [sys.executable, os.path.abspath(__file__), "--backend", b, "-np", str(args.np),
               "--timeout", str(args.timeout), "--start", args.start, "--json", out]
        for opt in ("k", "exclude"):
            for v in getattr(args, opt) or []:
                cmd += [f"--{opt}" if opt != "k" else "-k", v]
        if args.shard:
            cmd += ["--shard", args.shard]
        if args.expect and b == "weft":
            cmd += ["--expect", args.expect]
        if args.log:
            cmd += ["--log", f"{args.log}.{b}"]
        rc = subprocess.call(cmd)
        status = status or rc
        with open(out) as f:
            results[b] = json.load(f)
        os.unlink(out)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    if args.markdown:
        write_markdown(args.markdown, {b: results[b]["tests"] for b in backends}, args.np, describe(results))
    return status


if __name__ == "__main__":
    sys.exit(main())

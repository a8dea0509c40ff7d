"""``lockrace run FILE.spec ...``: run isolation specs, print isolationtester's
transcript on stdout, optionally compare with expected output.

stdout carries exactly the transcript (for one spec: the bytes upstream's
``expected/NAME.out`` holds); everything else goes to stderr: per-spec
verdicts, the unified diff when the output differs from ``--expected``, and a
last line with the wall time of running the specs (server start excluded).
All specs of one invocation share one server per engine.
"""

from __future__ import annotations

import difflib
import json
import sys
import time
from pathlib import Path

from ..core.serverwide import refuse_server_wide
from ..registry import CLUSTER_ENGINES, SINGLE_ENGINES, engine as engine_spec
from ..runtime.options import RunOptions, ServerChoice
from ..scenario.model import Scenario
from ..scenario.errors import ScenarioError, read_source_bytes

from ..exitguard import EXIT_FAILED, EXIT_OK, EXIT_UNUSABLE


def expected_candidates(expected: str | None, spec: Scenario, several: bool) -> list[Path] | None:
    """The files the output of ``spec`` may match: NAME.out, NAME_1.out, ...
    (a directory), or the one file given.  None when nothing is to compare."""
    if not expected:
        return None
    path = Path(expected)
    if path.is_dir():
        base = path / f"{spec.name}.out"
        alternates = sorted(path.glob(f"{spec.name}_[0-9].out"))
        return [p for p in [base, *alternates] if p.exists()] or [base]
    if several:
        raise ValueError("--expected FILE compares one spec; give a directory of NAME.out files for several")
    stem = path.name[:-4] if path.name.endswith(".out") else path.name
    alternates = sorted(path.parent.glob(f"{stem}_[0-9].out")) if path.name.endswith(".out") else []
    return [path, *alternates]


def compare(output: bytes, candidates: list[Path]) -> tuple[bool, str]:
    """(matches one candidate, unified diff against the closest one)."""
    best_diff, best_size = "", None
    got = output.decode("utf-8", "replace").splitlines(keepends=True)
    for cand in candidates:
        if not cand.exists():
            diff = f"lockrace: expected file {cand} does not exist\n"
            if best_size is None:
                best_diff, best_size = diff, 10**9
            continue
        try:
            data = read_source_bytes(cand)
        except ScenarioError as exc:
            if best_size is None:
                best_diff, best_size = f"lockrace: {exc}\n", 10**9
            continue
        if data == output:
            return True, ""
        lines = list(difflib.unified_diff(data.decode("utf-8", "replace").splitlines(keepends=True), got,
                                          str(cand), "lockrace output"))
        text = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)
        if best_size is None or len(lines) < best_size:
            best_diff, best_size = text, len(lines)
    return False, best_diff


def _say(text: str) -> None:
    print(f"lockrace: {text}", file=sys.stderr)


def refusal(specs: list[Scenario], options: RunOptions) -> str | None:
    """Why these specs cannot run as asked (one sentence), or None.  Isolation specs
    run on one server: clusters (galera, postgres-standby) are refused, not half-run."""
    singles = [engine_spec(e) for e in SINGLE_ENGINES]
    for name in options.servers.given():
        if name in CLUSTER_ENGINES:
            return (f"{engine_spec(name).flag} does not apply to isolation specs: a spec runs on one server"
                    f" (give {' or '.join(s.flag for s in singles)})")
    for spec in specs:
        engine = options.engine or spec.engines[0]
        if engine not in SINGLE_ENGINES:
            return (f"{spec.name}: isolation specs run on one server ({' or '.join(SINGLE_ENGINES)}), not on the"
                    f" {engine} cluster")
    return None


async def run_specs(specs: list[Scenario], options: RunOptions) -> int:
    from ..backends.base import ConnectError
    from ..runtime.pool import ServerUnavailable
    from ..runtime.races import server_pool
    from .execute import finish, run_spec

    fmt = options.format
    stream = fmt != "json"
    several = len(specs) > 1
    why = refusal(specs, options)
    if why:
        _say(why)
        return EXIT_UNUSABLE
    try:
        plans = [(spec, expected_candidates(options.expected, spec, several)) for spec in specs]
    except ValueError as exc:
        _say(str(exc))
        return EXIT_UNUSABLE
    servers = server_pool(ServerChoice({e: options.servers.dsn(e) for e in SINGLE_ENGINES}), say=_say)
    guard = options.interrupt
    if guard is not None:
        guard.stoppers.append(servers)
    results = []
    spent = 0.0
    unusable = False
    try:
        for index, (spec, candidates) in enumerate(plans):
            engine = options.engine or spec.engines[0]
            try:
                backend = await servers.backend(engine)
            except ServerUnavailable as exc:
                _say(str(exc))
                return EXIT_UNUSABLE
            wide = spec.server_wide(engine)
            if wide and not servers.targets[engine].owned:
                print(f"lockrace: {refuse_server_wide(spec.name, wide)}", file=sys.stderr)
                return EXIT_UNUSABLE
            out = bytearray()

            def emit(data: bytes) -> None:
                out.extend(data)
                if stream:
                    sys.stdout.buffer.write(data)
                    sys.stdout.buffer.flush()

            t0 = time.perf_counter()
            more = sum((options.engine or s.engines[0]) == engine for s, _ in plans[index + 1:])
            try:
                completed = await run_spec(spec, backend, emit, step_timeout=options.step_timeout, more_coming=more)
            except ConnectError as exc:  # the spec's place could not be made or cleaned: one sentence
                _say(f"{spec.name}: {exc}")
                unusable = True
                break
            elapsed = time.perf_counter() - t0
            spent += elapsed
            matched, diff = (None, "") if candidates is None else compare(bytes(out), candidates)
            results.append({"spec": spec.name, "path": str(spec.path or ""), "engine": engine,
                            "server": backend.server_name, "completed": completed, "matches_expected": matched,
                            "seconds": round(elapsed, 3), "output": bytes(out).decode("utf-8", "replace"),
                            "diff": diff})
            if matched is False and stream:
                sys.stderr.write(diff)
            if candidates is not None:
                verdict = "matches" if matched else "DIFFERS from"
                shown = candidates[0] if not matched else next(c for c in candidates if c.read_bytes() == bytes(out))
                print(f"lockrace: {spec.name} ({backend.server_name}) {verdict} {shown} [{elapsed:.2f} s]",
                      file=sys.stderr)
            elif not completed:
                print(f"lockrace: {spec.name} was aborted (see the transcript)", file=sys.stderr)
    finally:
        try:
            await finish()
        except ConnectError as exc:
            _say(str(exc))
            unusable = True
        finally:
            await servers.close(quick=guard is not None and guard.fired)
    if unusable:
        return EXIT_UNUSABLE
    print(f"lockrace: ran {len(results)} spec{'s' if len(results) != 1 else ''} in {spent:.2f} s wall time "
          f"(server start excluded)", file=sys.stderr)
    if fmt == "json":
        print(json.dumps({"specs": results, "seconds": round(spent, 3)}, indent=2))
    # with expected output the comparison decides; without, an aborted spec fails
    failed = any(not r["matches_expected"] if r["matches_expected"] is not None else not r["completed"]
                 for r in results)
    return EXIT_FAILED if failed else EXIT_OK

"""Benchmark: time to the first line of output of a fresh ``fairmon`` process
(issue 18 item 3), for ``--help``, a config error, ``run`` and ``backfill`` on a simulated
day in process (the default without PREFECT_API_URL) and ``run --prefect``
(Prefect's temporary API; it and GX start after that line), plus each
command's total time and CPU seconds of its process tree (issue 37), and
two runs the pre-flight check stops (issue 41 item 2: a day without its
file, a file with a misnamed column; target: answered within 2 CPU-s).
Target: the first line within 2 s for every command.

    .venv/bin/python bench/startup.py [--repeat 3] [--only preflight]

Prints per command the median seconds to the first output line and to exit, and CPU seconds;
the worst median time to first output, and the median CPU seconds of ``fairmon run``
and ``backfill`` in process when their first line came, the worse of the two (target ≤ 0.5);
then the calibration (``python -c "import duckdb"``, CPU-s, median of 3) and the load average;
last, the judged figure of issue 55 item 2: the CPU seconds (user + sys) of a new process that runs
``fairmon.run_day(config, ds)`` on a TikTok-size day (``simulate --days 7 --rows-per-day 300000``,
2026-01-07, a fresh copy of the folder each time, so the day's files are staged), median of
``--repeat`` runs, with the CPU at the call's return beside it (target: the process <= 3 CPU-s
where the calibration is <= 0.1). ``--only none`` runs no command, only the day.
"""

from __future__ import annotations

import argparse
import os
import selectors
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import calibration, children_cpu

FAIRMON = [sys.executable, "-m", "fairmon"]


def _process_cpu(pid: int) -> float:
    """CPU seconds (user + sys) the running process ``pid`` has used so far (Linux /proc; NaN elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def first_output(args: list[str], cwd: Path) -> tuple[float, float, int, float, float]:
    """(seconds to the first byte on stdout or stderr, seconds to exit, exit code,
    CPU seconds of the process tree: fairmon and what it waited for, e.g. Prefect's temporary server;
    CPU seconds of the fairmon process when its first byte arrived)."""
    env = {**os.environ, "COLUMNS": "100"}
    cpu0 = children_cpu()
    t0 = time.perf_counter()
    proc = subprocess.Popen([*FAIRMON, *args], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    sel.register(proc.stderr, selectors.EVENT_READ)
    first, first_cpu = None, float("nan")
    open_streams = 2
    while open_streams:
        for key, _ in sel.select():
            chunk = os.read(key.fileobj.fileno(), 65536)
            if not chunk:
                sel.unregister(key.fileobj)
                open_streams -= 1
            elif first is None:
                first, first_cpu = time.perf_counter() - t0, _process_cpu(proc.pid)
    code = proc.wait()
    total = time.perf_counter() - t0
    return (first if first is not None else float("nan")), total, code, children_cpu() - cpu0, first_cpu


RUN_DAY = """
import resource, sys
import fairmon
r = fairmon.run_day(sys.argv[1], "2026-01-07")
ru = resource.getrusage(resource.RUSAGE_SELF)
print(ru.ru_utime + ru.ru_stime, r["status"])
"""


def run_day_cpu(sim: Path, work: Path) -> tuple[float, float, str]:
    """``fairmon.run_day`` of sim's 2026-01-07 in a new process on a fresh copy
    of ``sim``. Returns (CPU seconds to the call's return, CPU seconds of the
    whole process tree, the day's status)."""
    day = work / "tiktok-day"
    shutil.rmtree(day, ignore_errors=True)
    shutil.copytree(sim, day)
    cpu0 = children_cpu()
    out = subprocess.run(
        [sys.executable, "-c", RUN_DAY, str(day / "fairmon.toml")], capture_output=True, text=True, check=True
    )
    total = children_cpu() - cpu0
    to_return, status = out.stdout.split()[-2:]
    return float(to_return), total, status


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", default="", help="run only the commands whose name contains this text")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="fairmon-startup-"))
    subprocess.run(
        [*FAIRMON, "simulate", "-o", str(work / "sim"), "--days", "1", "--rows-per-day", "20000"],
        check=True,
        capture_output=True,
    )
    (work / "bad.toml").write_text('[impressions]\nformat = "tiktok"\nrandom_window_days = 0\n')
    subprocess.run(["cp", "-r", str(work / "sim"), str(work / "renamed")], check=True)
    day = work / "renamed" / "default" / "2026-01-01.csv"
    text = day.read_text()
    day.write_text(text.replace("like_video", "like", 1))  # the header's column, as a newcomer's export names it
    commands = {
        "--help": ["--help"],
        "config error": ["run", "--date", "2026-01-01", "-c", str(work / "bad.toml")],
        "run (one day)": ["run", "--date", "2026-01-01", "-c", str(work / "sim" / "fairmon.toml")],
        "run --prefect": ["run", "--date", "2026-01-01", "-c", str(work / "sim" / "fairmon.toml"), "--prefect"],
        "backfill (one day)": [
            "backfill",
            "--start",
            "2026-01-01",
            "--end",
            "2026-01-01",
            "-c",
            str(work / "sim" / "fairmon.toml"),
        ],
        "preflight: no file": ["run", "--date", "2026-01-09", "-c", str(work / "sim" / "fairmon.toml")],
        "preflight: column": ["run", "--date", "2026-01-01", "-c", str(work / "renamed" / "fairmon.toml")],
    }
    commands = {name: cmd for name, cmd in commands.items() if args.only in name}
    worst = worst_cpu = 0.0
    print(f"{'command':<20} {'first output':>13} {'CPU then':>9} {'exit':>8} {'CPU':>7}  code")
    for name, cmd in commands.items():
        runs = [first_output(cmd, work) for _ in range(args.repeat)]
        first = statistics.median(r[0] for r in runs)
        total = statistics.median(r[1] for r in runs)
        cpu = statistics.median(r[3] for r in runs)
        first_cpu = statistics.median(r[4] for r in runs)
        print(f"{name:<20} {first:12.2f}s {first_cpu:8.2f}s {total:7.2f}s {cpu:6.2f}s  {runs[-1][2]}")
        worst = max(worst, first)
        if name in ("run (one day)", "backfill (one day)"):  # in process, the default without a Prefect API
            worst_cpu = max(worst_cpu, first_cpu)
    sim = work / "tiktok"
    subprocess.run(
        [*FAIRMON, "simulate", "-o", str(sim), "--days", "7", "--rows-per-day", "300000"],
        check=True,
        capture_output=True,
    )
    days = [run_day_cpu(sim, work) for _ in range(args.repeat)]
    if commands:
        print(f"worst median time to first output: {worst:.2f} s (target <= 2 s)")
        print(
            f"median CPU of `fairmon run`/`backfill` (in process) at the first line, the worse: {worst_cpu:.2f} "
            "CPU-s (target <= 0.5)"
        )
    print(f"calibration: python -c 'import duckdb' {calibration():.2f} CPU-s (median of 3)")
    print("load average: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    ret = statistics.median(d[0] for d in days)
    tot = statistics.median(d[1] for d in days)
    print(
        f"fairmon.run_day, TikTok-size day ({days[-1][2]}), new process: {tot:.2f} CPU-s "
        f"(target <= 3; {ret:.2f} to the call's return; runs, return/process: "
        f"{', '.join(f'{d[0]:.2f}/{d[1]:.2f}' for d in days)})"
    )


if __name__ == "__main__":
    main()

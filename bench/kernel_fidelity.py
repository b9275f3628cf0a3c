#!/usr/bin/env python3
"""Helper of bench/kernel_fidelity.sh (stdlib only).

  kernel_fidelity.py extract KIND JSON   metric<TAB>value lines from one run's
                                         fio or blkmq bench JSON report
  kernel_fidelity.py depth JOBFILE       I/Os the job file keeps in flight
  kernel_fidelity.py table RESULTS.tsv   markdown table of the medians

KIND is share (iops of the first job / the second), rwratio (read iops /
write iops over all jobs), lat (clat p50 and p99 of the job named reader)
or rate (each job's iops and MB/s, for limits).
RESULTS.tsv has case, metric, side (kernel or blkmq), rep, value per line.
"""
import json
import statistics
import sys


def load_report(path):
    # fio prints warnings ("fio: ...") ahead of the JSON on stdout.
    with open(path) as f:
        text = f.read()
    start = text.find("{")
    if start < 0:
        raise SystemExit(f"{path}: no JSON report")
    return json.loads(text[start:])


def job_iops(job):
    return job["read"]["iops"] + job["write"]["iops"]


def clat_us(side, pct):
    # fio leaves out "percentile" when a direction did no I/O.
    p = side["clat_ns"].get("percentile", {})
    v = p.get(pct)
    return None if v is None else v / 1000.0


def extract(kind, path):
    jobs = load_report(path)["jobs"]
    out = []
    if kind == "share":
        if len(jobs) < 2:
            raise SystemExit(f"{path}: share needs two jobs, found {len(jobs)}")
        a, b = job_iops(jobs[0]), job_iops(jobs[1])
        out.append((f"share {jobs[0]['jobname']}/{jobs[1]['jobname']}", a / b if b else float("inf")))
        for j in jobs:
            out.append((f"iops {j['jobname']}", job_iops(j)))
    elif kind == "rwratio":
        r = sum(j["read"]["iops"] for j in jobs)
        w = sum(j["write"]["iops"] for j in jobs)
        out.append(("read/write iops", r / w if w else float("inf")))
        out.append(("read iops", r))
        out.append(("write iops", w))
    elif kind == "lat":
        reader = next((j for j in jobs if j["jobname"] == "reader"), None)
        if reader is None:
            raise SystemExit(f"{path}: lat needs a job named reader")
        for pct, name in (("50.000000", "reader clat p50 us"), ("99.000000", "reader clat p99 us")):
            v = clat_us(reader["read"], pct)
            if v is not None:
                out.append((name, v))
        out.append(("reader iops", reader["read"]["iops"]))
        for j in jobs:
            if j is not reader:
                out.append((f"{j['jobname']} MB/s", (j["read"]["bw_bytes"] + j["write"]["bw_bytes"]) / 1e6))
    elif kind == "rate":
        for j in jobs:
            out.append((f"iops {j['jobname']}", job_iops(j)))
            out.append((f"{j['jobname']} MB/s", (j["read"]["bw_bytes"] + j["write"]["bw_bytes"]) / 1e6))
    else:
        raise SystemExit(f"unknown metric kind {kind}")
    for name, v in out:
        print(f"{name}\t{v:.6g}")


def depth(path):
    # Sum of iodepth * numjobs over the job sections, [global] as defaults.
    glob, jobs, cur = {}, [], None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line[0] in ";#":
                continue
            if line.startswith("["):
                cur = glob if line == "[global]" else {}
                if cur is not glob:
                    jobs.append(cur)
                continue
            if cur is not None and "=" in line:
                k, v = line.split("=", 1)
                cur[k.strip()] = v.strip()
    total = 0
    for j in jobs:
        o = {**glob, **j}
        total += int(o.get("iodepth", 1)) * int(o.get("numjobs", 1))
    print(total)


def fmt(v):
    if v is None:
        return "-"
    if v == float("inf"):
        return "inf"
    a = abs(v)
    if a >= 1000:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    return f"{v:.3g}"


def table(path):
    # (case, metric) in first-seen order -> side -> values in rep order
    rows = {}
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 5:
                continue
            case, metric, side, rep, value = parts
            rows.setdefault((case, metric), {}).setdefault(side, []).append((int(rep), float(value)))
    print("| scenario | metric | kernel (median) | blkmq (median) | blkmq/kernel | kernel runs | blkmq runs |")
    print("|---|---|---:|---:|---:|---|---|")
    for (case, metric), sides in rows.items():
        k = [v for _, v in sorted(sides.get("kernel", []))]
        b = [v for _, v in sorted(sides.get("blkmq", []))]
        km = statistics.median(k) if k else None
        bm = statistics.median(b) if b else None
        if km is None or bm is None or km in (0, float("inf")) or bm == float("inf"):
            ratio = "-"
        else:
            ratio = f"{bm / km:.2f}"
        print(f"| {case} | {metric} | {fmt(km)} | {fmt(bm)} | {ratio} | "
              f"{', '.join(fmt(v) for v in k)} | {', '.join(fmt(v) for v in b)} |")


def main(argv):
    if len(argv) == 4 and argv[1] == "extract":
        extract(argv[2], argv[3])
    elif len(argv) == 3 and argv[1] == "depth":
        depth(argv[2])
    elif len(argv) == 3 and argv[1] == "table":
        table(argv[2])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv)

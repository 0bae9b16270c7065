#!/usr/bin/python3
"""A real Prometheus server scrapes a running Weft job's metrics endpoints (issue 45): a 2-rank
weft-train-bench job (the gradient reducer, simulated compute) with WEFT_METRICS_PORT, Debian's
prometheus scraping both ranks every 500 ms. Then PromQL over what it stored: the job's all-reduce
count, its sync share, and every query of the Grafana dashboard (docs/grafana/weft-dashboard.json,
its variables filled in) must evaluate without error, and the ones about all-reduces and steps
must return series. Prints "prometheus_scrape OK"; exit 77 (skip) without prometheus.

  prometheus_scrape.py WEFTRUN TRAIN_BENCH DASHBOARD_JSON
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request


def free_port(count=1):
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + count < 65000 and all(port_free(base + k) for k in range(count)):
            return base
    sys.exit("prometheus_scrape: no free ports")


def port_free(p):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", p))
            return True
        except OSError:
            return False


def query(pport, q):
    url = f"http://127.0.0.1:{pport}/api/v1/query?" + urllib.parse.urlencode({"query": q})
    with urllib.request.urlopen(url, timeout=10) as r:
        doc = json.load(r)
    if doc.get("status") != "success":
        raise RuntimeError(f"query {q!r}: {doc}")
    return doc["data"]["result"]


def main():
    weftrun, bench, dashboard = sys.argv[1:4]
    prom = shutil.which("prometheus")
    if not prom:
        print("SKIP: prometheus is not installed (apt-get install prometheus; scripts/setup does)")
        return 77
    port, pport = free_port(2), free_port(1)
    work = tempfile.mkdtemp(prefix="weft-prom-")
    with open(os.path.join(work, "prom.yml"), "w") as f:
        f.write(f"""global:
  scrape_interval: 500ms
scrape_configs:
  - job_name: weft
    scrape_interval: 500ms
    static_configs:
      - targets: ["127.0.0.1:{port}", "127.0.0.1:{port + 1}"]
""")
    server = subprocess.Popen([prom, f"--config.file={work}/prom.yml", f"--storage.tsdb.path={work}/data",
                               f"--web.listen-address=127.0.0.1:{pport}"], stdout=subprocess.DEVNULL,
                              stderr=open(os.path.join(work, "prom.log"), "w"))
    env = dict(os.environ, WEFT_METRICS_PORT=str(port))
    job = subprocess.Popen([weftrun, "-np", "2", bench, "--model", "resnet50", "--steps", "400", "--warmup", "2",
                            "--compute", "sim", "--accel-tflops", "40", "--mode", "overlap"], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    failures = []
    try:
        calls = []
        for _ in range(60):  # until both ranks' all-reduce counts were scraped twice (rate needs two)
            time.sleep(0.5)
            if job.poll() is not None:
                break
            try:
                calls = query(pport, 'sum by (rank) (weft_collective_calls_total{job="weft",collective="allreduce"})')
                got = query(pport, 'count_over_time(weft_steps_total{job="weft"}[1m])')
            except OSError:
                continue  # the server is still starting
            if len(calls) == 2 and got and min(float(g["value"][1]) for g in got) >= 3:
                break
        if len(calls) != 2 or not all(float(c["value"][1]) > 0 for c in calls):
            failures.append(f"all-reduce count per rank: {calls}")
        else:
            print("prometheus_scrape: all-reduces per rank: " +
                  ", ".join(f"rank {c['metric']['rank']} {float(c['value'][1]):.0f}" for c in calls))
        share = query(pport, 'weft_step_sync_share{job="weft"}')
        if len(share) != 2 or not all(0 <= float(s["value"][1]) <= 1 for s in share):
            failures.append(f"sync share: {share}")
        else:
            print("prometheus_scrape: sync share per rank: " +
                  ", ".join(f"rank {s['metric']['rank']} {float(s['value'][1]):.3f}" for s in share))
        with open(dashboard) as f:
            panels = json.load(f)["panels"]
        exprs = [t["expr"] for p in panels for t in p.get("targets", []) if "expr" in t]
        for e in exprs:
            q = e.replace("$job", "weft").replace("$rank", ".*").replace("$__rate_interval", "5s")
            try:
                res = query(pport, q)
            except Exception as ex:  # noqa: BLE001  (an HTTP 400 is a bad query)
                failures.append(f"dashboard query does not evaluate: {e}: {ex}")
                continue
            wants_series = "errors_total" not in e  # no errors in this job: that panel is rightly empty
            if wants_series and not res:
                failures.append(f"dashboard query returned nothing: {e}")
        print(f"prometheus_scrape: {len(exprs)} dashboard queries evaluated")
    finally:
        job.kill()
        out = job.communicate()[0]
        server.terminate()
        server.wait(timeout=20)
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        print(out[-2000:])
        for f in failures:
            print("prometheus_scrape: FAILED: " + f)
        return 1
    print("prometheus_scrape OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())

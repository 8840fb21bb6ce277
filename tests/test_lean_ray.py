"""A local Ray for a Flower run starts only the services a simulation uses: no autoscaler monitor,
no log monitor (the run does not forward its workers' output) and no dashboard head
(simulations.runner.lean_head); GCS and the raylet still start, and actors still run. Read from the
processes the run's `ray.init` started (their command lines), in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = """
import json, os, ray
from ldpfed.config import Config
from simulations.runner import QUIET_ENVIRONMENT, backend_config, init_ray
import ray._private.parameter as parameter, ray._private.services as services

os.environ.update(QUIET_ENVIRONMENT)
plain = (parameter.RayParams, services.start_api_server)
init_ray(backend_config(Config().with_options({"cpus": 1}).validated(), nodes=1))
restored = (parameter.RayParams, services.start_api_server) == plain

def children(pid):
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as line:
                command = line.read().replace(b"\\0", b" ").decode()
        except (OSError, ValueError, IndexError):
            continue
        if parent == pid:
            found += [command, *children(int(entry))]
    return found

@ray.remote
def answer():
    return 42

print(json.dumps({"answer": ray.get(answer.remote()), "restored": restored, "processes": children(os.getpid())}))
ray.shutdown()
"""


def test_a_local_ray_for_flower_starts_gcs_and_raylet_but_no_monitor_log_monitor_or_dashboard_head():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["answer"] == 42 and report["restored"]
    commands = report["processes"]
    assert any("gcs_server" in command for command in commands)
    assert any("/raylet " in command for command in commands)
    unused = ("autoscaler/_private/monitor.py", "log_monitor.py", "dashboard/dashboard.py")
    assert [command for command in commands if any(name in command for name in unused)] == []

"""The benchmark scripts that a test can run on a CPU: the GPU check's dry run."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_gpu_check_dry_run_builds_everything_up_to_the_first_cuda_call():
    env = {**os.environ, "PY": sys.executable, "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run(["bash", str(ROOT / "bench" / "gpu_check.sh"), "--dry-run"], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for step in ("1. flex vs sdpa: 11 schemes", "2. compiled training: R=12, H=12, d=768, L_tr=512",
                 "3. one small model", "4. small book:", "dry run:"):
        assert step in out, out
    assert "Traceback" not in proc.stderr


def test_gpu_check_without_a_gpu_says_so_in_one_line():
    env = {**os.environ, "PY": sys.executable, "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run(["bash", str(ROOT / "bench" / "gpu_check.sh")], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 2 and proc.stdout.strip().splitlines()[-1].startswith("no CUDA device")

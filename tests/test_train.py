"""Training: the schedule, the batches, bitwise determinism, resuming after SIGKILL,
DistributedDataParallel over gloo, and the ``python -m rflens train`` command."""

import hashlib
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from rflens.errors import UserError
from rflens.setup import presets, settings
from rflens.setup.config import TrainConfig
from rflens.store import runs
from rflens.training.trainer import Batches, lr_at, read_checkpoint_pointer, train, warmup_steps

REPO = Path(__file__).resolve().parent.parent

# A synthetic corpus (no tokenizer needed): a seeded token stream in which every odd token
# is a function of the one before, so the loss has something to learn. Shared with the
# child processes below, which exec the same source.
SYNTHETIC = '''
import numpy as np

class SyntheticCorpus:
    fingerprint = "synthetic"

    def __init__(self, vocab_size=512, n=60_000, seed=0):
        stream = np.random.default_rng(seed).integers(0, vocab_size, size=n).astype(np.uint16)
        stream[1::2] = (stream[0::2] * 7 + 3) % vocab_size
        self.vocab_size, self._splits = vocab_size, {"train": stream[: n - 5000], "validation": stream[n - 5000:]}

    def tokens(self, split):
        return self._splits[split]
'''
exec(SYNTHETIC)  # defines SyntheticCorpus here too
SyntheticCorpus = globals()["SyntheticCorpus"]  # the name the exec made, for readers and the linter


def smoke_configs(**train_over):
    s = presets.get("smoke")
    return s.model, s.data, s.train.replace(**train_over)


def weights(path: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(Path(path) / "model.safetensors"))


def assert_same_weights(a: Path, b: Path) -> None:
    wa, wb = weights(a), weights(b)
    assert wa.keys() == wb.keys()
    for k in wa:
        assert wa[k].equal(wb[k]), f"{k} differs"


# ----------------------------------------------------------------------------- schedule and batches

def test_learning_rate_warms_up_then_decays_to_the_floor():
    cfg = TrainConfig(steps=200, lr=1e-3, warmup_frac=0.05, min_lr_frac=0.1)
    lrs = [lr_at(s, cfg) for s in range(cfg.steps)]
    w = warmup_steps(cfg)
    assert w == 10
    assert lrs[0] == pytest.approx(1e-4) and lrs[w - 1] == pytest.approx(1e-3)
    assert all(a < b for a, b in zip(lrs[:w - 1], lrs[1:w]))  # linear warm-up
    assert all(a >= b for a, b in zip(lrs[w:], lrs[w + 1:]))  # cosine decay
    assert lrs[-1] == pytest.approx(1e-4, rel=1e-3)  # lr * min_lr_frac at the end
    assert lr_at(w + (cfg.steps - w) // 2, cfg) == pytest.approx(1e-4 + 0.5 * 9e-4, rel=1e-2)


def test_ranks_split_one_global_batch():
    """The global batch is the same for any number of processes: each takes its slice."""
    tokens = np.arange(10_000, dtype=np.uint16)
    whole = Batches(tokens, l_tr=8, batch_size=8, seed=3)
    parts = [Batches(tokens, l_tr=8, batch_size=8, seed=3, rank=r, world=4) for r in range(4)]
    for _ in range(3):
        full = whole.next()
        assert full.shape == (8, 9) and full.dtype == np.int64
        assert np.array_equal(full, np.concatenate([p.next() for p in parts]))
        assert np.all(np.diff(full, axis=1) == 1)  # contiguous windows of l_tr + 1 tokens
    with pytest.raises(UserError, match="split evenly"):
        Batches(tokens, l_tr=8, batch_size=6, seed=0, rank=0, world=4)


def test_batches_resume_from_their_saved_state():
    tokens = np.arange(5_000, dtype=np.uint16)
    a = Batches(tokens, 16, 4, seed=1)
    a.next()
    state = a.state()
    expected = [a.next() for _ in range(3)]
    b = Batches(tokens, 16, 4, seed=1)
    b.set_state(state)
    assert all(np.array_equal(x, b.next()) for x in expected)


# ----------------------------------------------------------------------------- determinism

def test_two_runs_of_one_config_give_identical_weights(tmp_path):
    m, d, t = smoke_configs(steps=12, eval_interval=6, ckpt_interval=0)
    first = train(m, d, t, out_dir=tmp_path / "a", progress=False, corpus=SyntheticCorpus())
    second = train(m, d, t, out_dir=tmp_path / "b", progress=False, corpus=SyntheticCorpus())
    assert_same_weights(tmp_path / "a", tmp_path / "b")
    assert first["train_loss"] == second["train_loss"] and first["val_curve"] == second["val_curve"]
    assert first["train_loss"][-1] < first["train_loss"][0] < math.log(512) + 0.1
    assert (tmp_path / "a" / "manifest.json").is_file()
    assert not list((tmp_path / "a").glob("checkpoint*"))


CHILD = SYNTHETIC + '''
import sys, time
from rflens.model.transformer import TransformerLM
from rflens.setup import presets
from rflens.training import trainer

out_dir, delay = sys.argv[1], float(sys.argv[2])
if delay:  # slow each step down so the parent can kill the process mid-run
    loss = TransformerLM.loss
    TransformerLM.loss = lambda self, *a, **k: (time.sleep(delay), loss(self, *a, **k))[1]
s = presets.get("smoke")
trainer.train(s.model, s.data, s.train.replace(steps=40, ckpt_interval=5, eval_interval=10), out_dir=out_dir,
              progress=False, corpus=SyntheticCorpus())
'''


@pytest.mark.slow
def test_a_killed_run_resumes_to_the_weights_of_an_uninterrupted_one(tmp_path):
    """SIGKILL twice at arbitrary moments; the restarted run ends bitwise where an uninterrupted one does."""
    m, d, t = smoke_configs(steps=40, ckpt_interval=5, eval_interval=10)
    reference = train(m, d, t, out_dir=tmp_path / "ref", progress=False, corpus=SyntheticCorpus())
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    out = tmp_path / "killed"
    for kill_after in (12, 27):  # steps reached by a checkpoint before the kill
        child = subprocess.Popen([sys.executable, str(script), str(out), "0.05"], cwd=tmp_path)
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                if json.loads((out / "checkpoint.json").read_text())["step"] >= kill_after:
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.01)
        time.sleep(0.07)  # land somewhere inside a later step (or a checkpoint write)
        child.send_signal(signal.SIGKILL)
        child.wait()
        assert not (out / "manifest.json").exists(), "the run finished before it could be killed"
    subprocess.run([sys.executable, str(script), str(out), "0"], cwd=tmp_path, check=True)
    assert_same_weights(tmp_path / "ref", out)
    resumed = json.loads((out / "metrics.json").read_text())
    assert resumed["resumed_from"] >= 25
    assert resumed["train_loss"] == reference["train_loss"]
    assert resumed["val_curve"] == reference["val_curve"]


def test_a_corrupted_training_checkpoint_is_refused(tmp_path):
    m, d, t = smoke_configs(steps=4, ckpt_interval=2)
    (tmp_path / "checkpoint-00000002.pt").write_bytes(b"not a checkpoint")
    (tmp_path / "checkpoint.json").write_text(json.dumps({"file": "checkpoint-00000002.pt", "sha256": "0" * 64, "step": 2}))
    with pytest.raises(UserError, match="corrupted.*--retrain"):
        read_checkpoint_pointer(tmp_path)
    with pytest.raises(UserError, match="corrupted"):
        train(m, d, t, out_dir=tmp_path, progress=False, corpus=SyntheticCorpus())


class _Payload:
    """Unpickled, it runs code: it writes the file ``marker``."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return exec, (f"open({self.marker!r}, 'w').write('ran')",)


@pytest.mark.parametrize("where", ["inside", "absolute"])
def test_a_crafted_checkpoint_is_refused_and_its_code_never_runs(tmp_path, where):
    """A checkpoint is data: a pickle that would run code when loaded (named by the pointer
    with its true sha256, in the run's folder or by an absolute path elsewhere) is refused."""
    import hashlib

    import torch

    m, d, t = smoke_configs(steps=4, ckpt_interval=2)
    out, marker = tmp_path / "run", tmp_path / "marker"
    out.mkdir()
    crafted = (out if where == "inside" else tmp_path) / "checkpoint-00000002.pt"
    torch.save({"model": _Payload(marker)}, crafted)
    name = crafted.name if where == "inside" else str(crafted)
    digest = hashlib.sha256(crafted.read_bytes()).hexdigest()
    (out / "checkpoint.json").write_text(json.dumps({"file": name, "sha256": digest, "step": 2}))
    with pytest.raises(UserError, match="corrupted"):
        train(m, d, t, out_dir=out, progress=False, corpus=SyntheticCorpus())
    assert not marker.exists(), "loading the checkpoint ran the code it carries"


# ----------------------------------------------------------------------------- command line

@pytest.fixture(scope="module")
def cli_env(tmp_path_factory):
    """Environment for ``python -m rflens`` with a private run store and data folder."""
    root = tmp_path_factory.mktemp("cli")
    env = {**os.environ, "RFLENS_RUNS": str(root / "runs"), "RFLENS_DATA": str(root / "data"), "PYTHONUNBUFFERED": "1"}
    return env


def rflens(env, *args, timeout=300):
    return subprocess.run([sys.executable, "-m", "rflens", *args], env=env, cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


def snapshot(folder: Path) -> dict:
    """Every file under ``folder`` with its sha256 (the store "as it was")."""
    if not folder.exists():
        return {}
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def trained(cli_env):
    """``train --scale smoke --pos sandwich --corpus prose`` once (the issue's command)."""
    r = rflens(cli_env, "train", "--scale", "smoke", "--pos", "sandwich", "--corpus", "prose", "--quiet")
    assert r.returncode == 0, r.stderr
    return r


def test_train_then_reuse_the_stored_run(cli_env, trained):
    # reuse is a read: the stored weights are not written again (how fast it is, is a
    # benchmark's question, not a unit test's)
    assert trained.stdout.startswith("trained smoke sandwich on prose: 30 steps")
    weights = next(Path(cli_env["RFLENS_RUNS"]).glob("*/model.safetensors"))
    stamp = weights.stat().st_mtime_ns
    r = rflens(cli_env, "train", "--scale", "smoke", "--pos", "sandwich", "--corpus", "prose")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("reused the stored run") and weights.stat().st_mtime_ns == stamp
    r = rflens(cli_env, "train", "--scale", "smoke", "--pos", "sandwich", "--corpus", "prose", "--json")
    summary = json.loads(r.stdout)
    assert summary["reused"] and summary["steps"] == 30 and summary["pos"] == "sandwich"
    listing = rflens(cli_env, "runs")
    assert summary["key"] in listing.stdout and "sandwich" in listing.stdout


def test_retrain_reproduces_the_same_weights(cli_env, trained):
    store = Path(cli_env["RFLENS_RUNS"])
    before = snapshot(store)
    r = rflens(cli_env, "train", "--scale", "smoke", "--pos", "sandwich", "--corpus", "prose", "--retrain", "--json",
               "--quiet")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert not summary["reused"]
    after = snapshot(store)
    weights_file = f"{summary['key']}/model.safetensors"
    assert after[weights_file] == before[weights_file]  # bitwise the same model


BAD_INPUTS = {
    "unknown scheme": (["--pos", "alibii"], "invalid pos='alibii'"),
    "unknown preset": (["--scale", "huge"], "unknown scale 'huge'"),
    "unknown key": (["--set", "windw=8"], "unknown setting"),
    "wrong type": (["--set", "steps=many"], "expected a value of type int"),
    "bad value": (["--set", "steps=-3"], "must be a positive integer"),
    "eval setting": (["--set", "n_segments=5"], "evaluation setting"),
    "missing data": (["--set", "source=files", "--set", "files=/nonexistent/corpus.txt"], "no such file"),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_is_one_line_exit_2_and_leaves_the_store_alone(cli_env, trained, case):
    args, message = BAD_INPUTS[case]
    store = Path(cli_env["RFLENS_RUNS"])
    before = snapshot(store)
    r = rflens(cli_env, "train", "--scale", "smoke", "--pos", "sandwich", "--corpus", "prose", "--quiet", *args)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], r.stderr
    assert snapshot(store) == before


def test_a_corrupted_stored_model_is_exit_2_with_the_fix(cli_env, trained):
    store = Path(cli_env["RFLENS_RUNS"])
    key = json.loads(rflens(cli_env, "train", "--scale", "smoke", "--pos", "sandwich", "--json").stdout)["key"]
    weights_path = store / key / "model.safetensors"
    good = weights_path.read_bytes()
    bad = bytearray(good)
    bad[len(bad) // 2] ^= 0x01
    weights_path.write_bytes(bytes(bad))
    try:
        before = snapshot(store)
        r = rflens(cli_env, "train", "--scale", "smoke", "--pos", "sandwich", "--corpus", "prose")
        assert r.returncode == 2
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and "corrupted" in lines[0] and "--retrain" in lines[0], r.stderr
        assert snapshot(store) == before
    finally:
        weights_path.write_bytes(good)


def test_a_corrupted_resume_checkpoint_is_exit_2(cli_env, trained):
    from rflens import data

    store = Path(cli_env["RFLENS_RUNS"])
    _, m, d, t = settings.resolve(presets.get("smoke"), "alibi", "prose", {"steps": 7})
    old = os.environ.get("RFLENS_DATA")
    os.environ["RFLENS_DATA"] = cli_env["RFLENS_DATA"]
    try:
        corpus = data.prepare(d, progress=False)
    finally:
        os.environ.pop("RFLENS_DATA") if old is None else os.environ.__setitem__("RFLENS_DATA", old)
    path = store / runs.run_key(m, d, t, corpus.fingerprint)
    path.mkdir(parents=True)
    (path / "checkpoint-00000005.pt").write_bytes(b"truncated")
    (path / "checkpoint.json").write_text(json.dumps({"file": "checkpoint-00000005.pt", "sha256": "0" * 64, "step": 5}))
    before = snapshot(store)
    r = rflens(cli_env, "train", "--scale", "smoke", "--pos", "alibi", "--set", "steps=7", "--quiet")
    assert r.returncode == 2 and "corrupted" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert snapshot(store) == before


# ----------------------------------------------------------------------------- several processes

@pytest.mark.slow
def test_two_gloo_processes_follow_the_loss_curve_of_one(cli_env, trained, tmp_path):
    """torchrun --nproc_per_node 2: the same global batch, so the same run up to float rounding.

    Tolerance: 1e-4 relative on every step's training loss and on the validation loss
    (the ranks average gradients in another summation order than one process does).
    """
    args = ["train", "--scale", "smoke", "--pos", "alibi", "--corpus", "prose", "--quiet", "--json"]
    single = rflens({**cli_env, "RFLENS_RUNS": str(tmp_path / "one")}, *args)
    assert single.returncode == 0, single.stderr
    env = {**cli_env, "RFLENS_RUNS": str(tmp_path / "two"), "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                        "-m", "rflens", *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    one, two = json.loads(single.stdout), json.loads(r.stdout)
    assert one["key"] == two["key"]  # the same model, whatever the number of processes
    m1 = json.loads((tmp_path / "one" / one["key"] / "metrics.json").read_text())
    m2 = json.loads((tmp_path / "two" / two["key"] / "metrics.json").read_text())
    assert m2["world_size"] == 2 and m1["world_size"] == 1
    np.testing.assert_allclose(m2["train_loss"], m1["train_loss"], rtol=1e-4)
    np.testing.assert_allclose(m2["val_loss"], m1["val_loss"], rtol=1e-4)
    w1, w2 = weights(tmp_path / "one" / one["key"]), weights(tmp_path / "two" / two["key"])
    for k in w1:
        np.testing.assert_allclose(w2[k].numpy(), w1[k].numpy(), atol=1e-4)

"""A write of weights that fails (a full disk, say) is one line naming the folder, why and the
space free there, whatever library wrote them; nothing half-written is left."""

from __future__ import annotations

import pytest
from safetensors import SafetensorError

from rflens.cli import main
from rflens.setup import presets

WSD = (("schedule", "wsd"), ("warmup", 2), ("steps", 32), ("ckpt_interval", 8))  # a long run at the smoke scale
FULL = 'Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "No space left on device" })'


@pytest.fixture
def full_disk(monkeypatch):
    """safetensors meets a full disk: what it raises then (a SafetensorError, not an OSError)."""
    import safetensors.torch

    def full(tensors, filename, metadata=None):
        with open(filename, "wb") as f:  # a part written before the disk filled
            f.write(b"\0" * 64)
        raise SafetensorError(FULL)

    monkeypatch.setattr(safetensors.torch, "save_file", full)


@pytest.mark.parametrize("error", ["safetensors", "oserror"])
def test_a_full_disk_while_writing_the_final_weights_is_one_line(store, full_disk, monkeypatch, capsys, error):
    if error == "oserror":
        import safetensors.torch

        def full(tensors, filename, metadata=None):
            raise OSError(28, "No space left on device", filename)

        monkeypatch.setattr(safetensors.torch, "save_file", full)
    assert main(["train", "--scale", "smoke", "--pos", "alibi", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:"), err
    (run,) = [p for p in store.iterdir() if p.is_dir()]
    assert f"cannot write model.safetensors in {run}" in err[0] and "No space left on device" in err[0]
    assert "MiB free there" in err[0] and "RFLENS_RUNS" in err[0]
    assert not (run / "model.safetensors").exists() and not (run / "manifest.json").exists()
    assert not list(run.glob(".*.tmp"))  # nothing half-written
    assert list(run.glob("checkpoint*"))  # what resumes it is kept


def test_a_full_disk_while_shipping_weights_to_the_bundle_is_one_line(store, reference, full_disk):
    from rflens.errors import UserError
    from rflens.longrun import emergence, plan
    from rflens.store import bundle

    with pytest.raises(UserError, match=r"cannot write model\.safetensors in .*reference/smoke/\.?alibi_\S+ \(No space left on "
                                        r"device; .* MiB free there\): .*RFLENS_REFERENCE") as caught:
        emergence.run(plan.LongModel("alibi", WSD), presets.get("smoke"), progress=False, keep_weights=True)
    assert "\n" not in str(caught.value)
    assert not bundle.complete("smoke")  # not shipped: its manifest was never written

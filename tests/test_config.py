"""Settings are checked when they are made; overrides are typed and validated."""

import pytest

from rflens.errors import ConfigError, UserError
from rflens.setup.config import DataConfig, EvalConfig, ModelConfig, parse_overrides, TrainConfig


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"d_model": 100, "n_head": 12}, "d_model"),
        ({"window": 0}, "window"),
        ({"window": -4}, "window"),
        ({"pos": "absolute"}, "pos"),
        ({"d_bar": 127}, "d_bar"),
        ({"pos": "window"}, "window"),
        ({"slopes": "geometric"}, "slopes"),
        ({"pos": "kerple_power", "kerple_r2": 3.0}, "kerple_r2"),
        ({"n_layer": 0}, "n_layer"),
    ],
)
def test_bad_model_config_names_the_field(kwargs, field):
    with pytest.raises(ConfigError) as err:
        ModelConfig(**kwargs)
    assert err.value.field == field
    assert field in str(err.value) and "\n" not in str(err.value)


def test_unknown_scheme_lists_the_allowed_values():
    with pytest.raises(ConfigError, match="sandwich"):
        ModelConfig(pos="sandwhich")


def test_config_errors_are_user_errors():
    assert issubclass(ConfigError, UserError)


@pytest.mark.parametrize(
    "cls, kwargs",
    [
        (DataConfig, {"corpus": "poetry"}),
        (DataConfig, {"source": "files"}),
        (TrainConfig, {"l_tr": 0}),
        (TrainConfig, {"dtype": "fp8"}),
        (EvalConfig, {"length_mults": ()}),
        (EvalConfig, {"erf_threshold": 1.5}),
        (EvalConfig, {"protocol": "strided"}),
    ],
)
def test_other_settings_are_validated(cls, kwargs):
    with pytest.raises(ConfigError):
        cls(**kwargs)


def test_round_trip_through_dict():
    cfg = ModelConfig(pos="sandwich", d_bar=256, window=8)
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    assert EvalConfig.from_dict(EvalConfig().to_dict()) == EvalConfig()


def test_overrides_are_typed_and_routed_to_their_section():
    out = parse_overrides(["window=8", "train.steps=10", "same_slope=none", "length_mults=1,2", "tie_weights=false"])
    assert out["model"] == {"window": 8, "same_slope": None, "tie_weights": False}
    assert out["train"] == {"steps": 10}
    assert out["eval"] == {"length_mults": (1, 2)}


def test_shared_keys_go_to_every_section_that_has_them():
    out = parse_overrides(["vocab_size=512"])
    assert out["model"]["vocab_size"] == 512 and out["data"]["vocab_size"] == 512


@pytest.mark.parametrize("pair", ["windw=8", "window=eight", "window", "model.steps=3", "optim.lr=1"])
def test_bad_overrides_raise_one_clear_error(pair):
    with pytest.raises(ConfigError):
        parse_overrides([pair])

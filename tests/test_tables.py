"""The book's tables as CSV: the provenance lines, the files a chapter writes as it shows
its tables, and the export of the run store."""

import numpy as np
import pandas as pd
import pytest

from rflens.publish import csv_files
from rflens.setup import settings
from rflens.setup import presets


def test_a_table_is_written_with_its_provenance_and_read_back(tmp_path):
    df = pd.DataFrame({"label": ["a", "b"], "ppl@32": [10.5, 11.25]}).set_index("label")
    path = csv_files.write_csv(df, tmp_path / "t" / "x.csv", {"scale": "tiny", "code_version": "abc"})
    text = path.read_text().splitlines()
    assert text[:2] == ["# scale: tiny", "# code_version: abc"]
    back = pd.read_csv(path, comment="#").set_index("label")
    pd.testing.assert_frame_equal(back, df)


def test_provenance_names_the_code_and_the_prepared_corpora():
    from rflens import data
    from rflens.store import runs

    data.prepare(settings.resolve(presets.get("smoke"), "alibi", "prose").data, progress=False)
    meta = csv_files.provenance("smoke")
    assert meta["scale"] == "smoke" and meta["code_version"] == runs.code_version()
    assert meta["data_prose"] == data.prepare(settings.resolve(presets.get("smoke"), "alibi", "prose").data, progress=False).fingerprint
    assert all(k.startswith("data_") for k in meta if k not in ("scale", "code_version"))


def test_a_chapter_run_by_reproduce_writes_each_table_it_shows(tmp_path, monkeypatch):
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        assert not csv_files.offer_tables("smoke")  # a live notebook: nothing written
        monkeypatch.setenv(csv_files.TABLES_ENV, str(tmp_path / "tables"))
        monkeypatch.setenv(csv_files.CHAPTER_ENV, "03_alibi_dissected")
        assert csv_files.offer_tables("smoke")
        first = pd.DataFrame({"r@64": [1.0, np.nan]}, index=pd.Index(["w=8", "w=16"], name="label"))
        html = shell.display_formatter.format(first)[0]["text/html"]
        assert 'href="tables/03_alibi_dissected-table1.csv"' in html and "<table" in html
        shell.display_formatter.format(first.style)
        written = sorted(p.name for p in (tmp_path / "tables").iterdir())
        assert written == ["03_alibi_dissected-table1.csv", "03_alibi_dissected-table2.csv"]
        back = pd.read_csv(tmp_path / "tables" / written[0], comment="#")
        assert list(back["label"]) == ["w=8", "w=16"] and np.isnan(back["r@64"][1])
        assert "# chapter: 03_alibi_dissected" in (tmp_path / "tables" / written[0]).read_text()
        # a rounded view of a wide table downloads at full precision, with every interval
        from rflens.measure import columns

        wide = pd.DataFrame({"label": ["w=8"], "ppl@32": [10.123456], "ci_low@32": [9.5], "ci_high@32": [10.7],
                             "r@32": [1.0], "r_lo@32": [1.0], "r_hi@32": [1.0], "ppl@64": [12.345678],
                             "ci_low@64": [11.0], "ci_high@64": [13.0], "r@64": [1.2195121], "r_lo@64": [1.1012345],
                             "r_hi@64": [1.3456789]})
        view = columns.display_table(wide, "r")
        assert view.loc["w=8", "64"] == "1.22"
        shell.display_formatter.format(view)
        back = pd.read_csv(tmp_path / "tables" / "03_alibi_dissected-table3.csv", comment="#")
        assert back["r_lo@64"][0] == 1.1012345 and back["ppl@64"][0] == 12.345678 and back["r@64"][0] == 1.2195121
    finally:
        InteractiveShell.clear_instance()


@pytest.mark.slow
def test_the_run_store_exports_its_models_and_results(store, tmp_path, monkeypatch, capsys):
    from rflens import cli
    from rflens.measure import perplexity, receptive
    from rflens.store import runs

    run = runs.get_run(presets.get("smoke"), "alibi", "prose", progress=False)
    res = perplexity.perplexity(run, progress=False)
    rf = receptive.receptive_field(run, progress=False)
    assert cli.main(["runs", "--export", str(tmp_path / "out")]) == 0
    assert capsys.readouterr().out.count("wrote ") == 3
    models = pd.read_csv(tmp_path / "out" / "runs.csv", comment="#")
    assert list(models["key"]) == [run.key] and models["data_fingerprint"][0] == run.data_fingerprint
    ppl = pd.read_csv(tmp_path / "out" / "perplexity.csv", comment="#")
    assert list(ppl["l_ex"]) == res["lengths"] and np.allclose(ppl["ppl"], res["ppl"])
    erf = pd.read_csv(tmp_path / "out" / "receptive_fields.csv", comment="#")
    assert list(erf["erf"]) == [rf["erf"]]


# ----------------------------------------------------------------------------- rendered tables
CODE_NAME = r"^[a-z]+(_[a-z]+)+$|@"  # a header a reader should not have to decode


def test_a_rendered_table_reads_in_words_with_one_format_per_column():
    import re

    from rflens.measure import columns

    wide = pd.DataFrame({"label": ["w=8", "w=16"], "ppl@32": [10.0, 11.5], "r@32": [1.0, 1.0], "r@64": [1.2, np.nan],
                         "r_lo@64": [1.1, np.nan], "r_hi@64": [1.3, np.nan], "l_tr": [32, 32], "erf": [120, 30],
                         "erf_capped": [True, False], "erf_length": [128, 128], "share_in_ltr": [0.3, 0.991],
                         "jump_abs_pos": [31, 12], "extrapolates": [False, None], "max_r": [1.2, 1.0]})
    view = columns.display_table(wide, "r", extra=["l_tr", "erf", "share_in_ltr", "jump_abs_pos", "extrapolates", "max_r"])
    cells = view.to_numpy().ravel().tolist()
    assert not any(re.search(CODE_NAME, str(h)) for h in [*view.columns, *view.index.names]), list(view.columns)
    assert "nan" not in " ".join(map(str, cells)).lower() and "NaN" not in view.to_html()
    assert list(view["32"]) == ["1.00", "1.00"] and list(view["largest r"]) == ["1.20", "1.00"]
    assert list(view["ERF (of 128)"]) == ["≥ 120", "30"] and list(view["gradient in L_tr"]) == ["30%", "99%"]
    assert list(view["extrapolates"]) == ["no", "–"] and list(view["64"]) == ["1.20", "–"]
    # the download keeps every number at full precision, with the flag and the segment length
    full = pd.DataFrame(view.attrs["csv"])
    assert full["erf_capped"].tolist() == [True, False] and full["share_in_ltr"][1] == 0.991


def test_segments_of_several_lengths_keep_their_own_column():
    from rflens.measure import columns

    df = pd.DataFrame({"erf": [40, 500], "erf_capped": [False, True], "erf_length": [64, 512]}, index=["a", "b"])
    view = columns.readable(df)
    assert list(view.columns) == ["ERF", "ERF segment"] and list(view["ERF"]) == ["40", "≥ 500"]


# code names a reader must not meet in a shown table: bench and run-store keys, raw column names
CODE_VALUE = r"[a-z]+_[a-z_]+=|^(win\d+|alibi_(max|min)|nope_bos|sin_scaled|corner|slope_shift|same_slope)$|_bos$"
CODE_HEADER = r"^r (wsd|hi|lo|top)\b|^ppl top\b|^(stage|name|pos|spec)$"


def _shown(view) -> list[str]:
    """Every header, index name and row name of a rendered table."""
    names = [*map(str, view.columns), *[str(n) for n in view.index.names if n is not None]]
    rows = [str(v) for level in range(view.index.nlevels) for v in view.index.get_level_values(level)]
    return names + rows


def _no_code_names(view) -> None:
    import re

    assert not isinstance(view.index, pd.RangeIndex), "rows numbered 0..N instead of named"
    shown = _shown(view)
    assert not [s for s in shown if re.search(CODE_VALUE, s) or re.search(CODE_HEADER, s)
                or re.search(CODE_NAME, s)], shown
    cells = [str(v) for v in view.to_numpy().ravel()]
    assert not [c for c in cells if re.search(CODE_VALUE, c)], cells


def test_a_rendered_table_names_its_rows_by_model_and_its_families_by_their_titles():
    from rflens.measure import columns
    from rflens.setup.presets import FAMILIES

    df = pd.DataFrame({"label": ["Δ=-8", "w=8"], "family": ["slope_shift", "window"], "pos": ["alibi", "window"],
                       "erf": [4, 30]})
    view = columns.readable(df)
    assert list(view.index) == ["Δ=-8", "w=8"] and view.index.name == "model"
    assert list(view["family"]) == [FAMILIES["slope_shift"].title, FAMILIES["window"].title]
    assert list(view["scheme"]) == ["ALiBi", "Windowed"]
    _no_code_names(view)
    # a table whose rows are already named keeps its index; one with no model column keeps its numbers
    assert list(columns.readable(df.set_index("family")).index) == ["slope_shift", "window"]
    assert isinstance(columns.readable(df[["erf"]]).index, pd.RangeIndex)


def test_the_pilot_tables_name_each_model_by_its_scheme_and_setting():
    from rflens.measure import columns
    from rflens.readings import pilot

    sweep = pilot.pilot_table()
    if sweep.empty:
        pytest.skip("no pilot measurements in this checkout")
    view = columns.readable(pilot.view(sweep), digits=3)
    _no_code_names(view)
    assert list(view.index.names) == ["R", "d", "L_tr", "training tokens", "model"]
    labels = set(view.index.get_level_values("model"))
    assert "ALiBi Δ=4 (paper's 8)" in labels and "NoPE with a fixed first token" in labels
    summary = columns.readable(pilot.pilot_summary(sweep), digits=3)
    _no_code_names(summary)
    assert any("R·w/L_tr=4.5" in m for m in summary["missing"])
    seeds = pilot.seed_spread()
    for key, digits in (("table1", 3), ("table3", 1)):
        if not seeds[key].empty:
            _no_code_names(columns.readable(seeds[key], digits=digits))


def test_a_wide_table_scrolls_in_its_own_box_with_a_scrollbar_in_view_and_wrapped_headers():
    """The book's CSS: a table wider than the column scrolls inside its output box, whose
    scrollbar is styled (so drawn even where the system hides scrollbars until one scrolls),
    and headers wrap into a few lines so that a table keeps few columns out of view."""
    import re
    from importlib.resources import files

    css = re.sub(r"/\*.*?\*/", "", files("rflens").joinpath("publish", "book.css").read_text(), flags=re.S)
    rules = {sel.strip(): body for sels, body in re.findall(r"([^{}]+)\{([^}]*)\}", css) for sel in sels.split(",")}
    assert "overflow-x: auto" in rules["div.cell_output div.output"]
    assert "height" in rules["div.cell_output div.output::-webkit-scrollbar"]
    assert "background" in rules["div.cell_output div.output::-webkit-scrollbar-thumb"]
    head = rules["div.cell_output table.dataframe thead th"]
    assert "white-space: normal" in head and "max-width" in head
    assert "white-space: nowrap" in rules["div.cell_output table.dataframe tbody th"]  # a model's name on one line


def test_a_long_runs_rows_are_headed_with_that_run_and_a_hash_column_keeps_its_header(tmp_path, monkeypatch):
    from IPython.core.interactiveshell import InteractiveShell

    from rflens.experiments import from_bundle
    from rflens.measure import columns

    shell = InteractiveShell.instance()
    monkeypatch.setenv(csv_files.TABLES_ENV, str(tmp_path / "tables"))
    monkeypatch.setenv(csv_files.CHAPTER_ENV, "03_alibi_dissected")
    try:
        assert csv_files.offer_tables("smoke")
        long_t1, _ = from_bundle.experiment("table1", presets.get("long"))
        shell.display_formatter.format(columns.display_table(long_t1, "r"))  # a long run's rows in a smoke chapter
        shell.display_formatter.format(pd.DataFrame({"#": [1, 2], "claim": ["a", "b"]}))  # the chapter's own
    finally:
        InteractiveShell.clear_instance()
    first, second = sorted((tmp_path / "tables").iterdir())
    assert "# scale: long\n" in first.read_text() and "# scale: smoke\n" in second.read_text()
    back = pd.read_csv(second, comment="#")
    assert list(back.columns) == ["number", "claim"] and list(back["number"]) == [1, 2]

"""The book's tables as CSV: the provenance lines, the files a chapter writes as it shows
its tables, and the export of the run store."""

import numpy as np
import pandas as pd
import pytest

from rflens import settings, tables


def test_a_table_is_written_with_its_provenance_and_read_back(tmp_path):
    df = pd.DataFrame({"label": ["a", "b"], "ppl@32": [10.5, 11.25]}).set_index("label")
    path = tables.write_csv(df, tmp_path / "t" / "x.csv", {"scale": "tiny", "code_version": "abc"})
    text = path.read_text().splitlines()
    assert text[:2] == ["# scale: tiny", "# code_version: abc"]
    back = pd.read_csv(path, comment="#").set_index("label")
    pd.testing.assert_frame_equal(back, df)


def test_provenance_names_the_code_and_the_prepared_corpora():
    from rflens import data, runs

    data.prepare(settings.resolve("smoke", "alibi", "prose").data, progress=False)
    meta = tables.provenance("smoke")
    assert meta["scale"] == "smoke" and meta["code_version"] == runs.code_version()
    assert meta["data_prose"] == data.prepare(settings.resolve("smoke", "alibi", "prose").data, progress=False).fingerprint
    assert all(k.startswith("data_") for k in meta if k not in ("scale", "code_version"))


def test_a_chapter_run_by_reproduce_writes_each_table_it_shows(tmp_path, monkeypatch):
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        assert not tables.offer_tables("smoke")  # a live notebook: nothing written
        monkeypatch.setenv(tables.TABLES_ENV, str(tmp_path / "tables"))
        monkeypatch.setenv(tables.CHAPTER_ENV, "03_alibi_dissected")
        assert tables.offer_tables("smoke")
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
        from rflens import results

        wide = pd.DataFrame({"label": ["w=8"], "ppl@32": [10.123456], "ci_low@32": [9.5], "ci_high@32": [10.7],
                             "r@32": [1.0], "r_lo@32": [1.0], "r_hi@32": [1.0], "ppl@64": [12.345678],
                             "ci_low@64": [11.0], "ci_high@64": [13.0], "r@64": [1.2195121], "r_lo@64": [1.1012345],
                             "r_hi@64": [1.3456789]})
        view = results.display_table(wide, "r")
        assert view.loc["w=8", "64"] == "1.22"
        shell.display_formatter.format(view)
        back = pd.read_csv(tmp_path / "tables" / "03_alibi_dissected-table3.csv", comment="#")
        assert back["r_lo@64"][0] == 1.1012345 and back["ppl@64"][0] == 12.345678 and back["r@64"][0] == 1.2195121
    finally:
        InteractiveShell.clear_instance()


@pytest.mark.slow
def test_the_run_store_exports_its_models_and_results(store, tmp_path, monkeypatch, capsys):
    from rflens import cli, evaluate, receptive, runs

    run = runs.get_run("smoke", "alibi", "prose", progress=False)
    res = evaluate.perplexity(run, progress=False)
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

    from rflens import results

    wide = pd.DataFrame({"label": ["w=8", "w=16"], "ppl@32": [10.0, 11.5], "r@32": [1.0, 1.0], "r@64": [1.2, np.nan],
                         "r_lo@64": [1.1, np.nan], "r_hi@64": [1.3, np.nan], "l_tr": [32, 32], "erf": [120, 30],
                         "erf_capped": [True, False], "erf_length": [128, 128], "share_in_ltr": [0.3, 0.991],
                         "jump_abs_pos": [31, 12], "extrapolates": [False, None], "max_r": [1.2, 1.0]})
    view = results.display_table(wide, "r", extra=["l_tr", "erf", "share_in_ltr", "jump_abs_pos", "extrapolates", "max_r"])
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
    from rflens import results

    df = pd.DataFrame({"erf": [40, 500], "erf_capped": [False, True], "erf_length": [64, 512]}, index=["a", "b"])
    view = results.readable(df)
    assert list(view.columns) == ["ERF", "ERF segment"] and list(view["ERF"]) == ["40", "≥ 500"]

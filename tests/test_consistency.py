"""The book's statements about itself against what they state it of (tests/consistency.py):
each reader catches the contradiction planted for it, and finds none in the shipped bundles'
boards. The built pages and their CSVs are read by the browser test."""

from __future__ import annotations

import pytest
from consistency import (finished_runs, label_contradictions, pointer_contradictions, provenance_contradictions,
                         status_contradictions)

from rflens.claims.statements import CLAIMS
from rflens.store import bundle

SHORTS = {c.id: c.short for c in CLAIMS}


def test_a_finished_run_said_to_be_training_is_caught():
    finished = finished_runs()
    assert "long-sotu" in finished and "deep-d128" not in finished  # the ladders as their bundles hold them
    planted = "`long-sotu` reads none of these claims yet: its models are still training (chapter 10)."
    assert status_contradictions(planted, finished) == ["long-sotu"]
    assert status_contradictions("The claims of `deep-d128` wait for models still training.", finished) == []
    assert status_contradictions("`long-sotu` has every model finished; `deep-d128` is training.", finished) == []


def test_a_label_that_names_a_setting_its_claim_did_not_read_is_caught():
    board = {"deep": [{"id": 2, "result": "pass", "measured": "w = 320: r(16 L_tr) = 3.41 [2.97, 3.82]"},
                      {"id": 4, "result": "pass", "measured": "Δ = -3: max r = 1.00; Δ = 8: r(16 L_tr) = 3.99"},
                      {"id": 1, "result": "not run", "measured": "not run"}]}
    assert label_contradictions(board, SHORTS) == []
    planted = {**SHORTS, 2: "windows from w = 120 break"}  # the label the 12-layer board contradicted
    assert label_contradictions(board, planted) == [("deep", 2, "w = 120")]
    assert label_contradictions({"deep": [{"id": 1, "result": "pass", "measured": "w = 100: r = 1.00"}]},
                                {1: "windows up to w = 10 extrapolate"}) == [("deep", 1, "w = 10")]  # not w = 100


@pytest.mark.slow
def test_no_claims_label_names_a_setting_its_boards_did_not_read():
    from rflens.claims import scoreboard

    boards = scoreboard.shipped_boards()
    assert set(boards) >= {"long", "deep"} and any(SHORTS[1] and row["id"] == 1 for row in boards["deep"])
    assert label_contradictions(boards, SHORTS) == []


def test_a_csv_headed_with_another_presets_name_is_caught():
    long = bundle.fingerprints("long")["prose"]
    deep = bundle.fingerprints("deep")["prose"]
    tiny_fp = "0" * 64

    def fingerprints(scale):
        return {"long": {"prose": {long}}, "deep": {"prose": {deep}}, "tiny": {"prose": {tiny_fp}}}[scale]

    good = f"# scale: long\n# code_version: x\n# data_prose: {long}\n# chapter: 03\nmodel,r\nΔ = 8,3.2\n"
    assert provenance_contradictions(good, fingerprints) == []
    planted = f"# scale: tiny\n# code_version: x\n# data_prose: {long}\nmodel,r\nΔ = 8,3.2\n"  # long's rows as tiny's
    assert provenance_contradictions(planted, fingerprints) == [f"data_prose: {long} is not a corpus of tiny"]
    assert long != deep or provenance_contradictions(good.replace("scale: long", "scale: deep"), fingerprints) == []


def test_a_csv_of_a_long_runs_rows_is_headed_with_the_data_its_bundle_was_trained_on():
    from rflens.publish.csv_files import provenance

    head = provenance("long")
    assert head["scale"] == "long" and head["data_prose"] == bundle.fingerprints("long")["prose"]
    assert set(head) >= {"data_prose", "data_code", "data_math"}  # built here or not


def test_a_pointer_to_a_page_that_does_not_show_it_is_caught():
    pages = {"01_introduction": "every chapter runs from a clone of the repository (the front page says how).",
             "index": "Rerun it: git clone the repository, then make book.",
             "10_long_runs": "chapter 9 reads what that did to its models' validation loss",
             "09_claims": "The scoreboard of every claim.", "12_beyond_the_paper": "Hugging Face models"}
    assert pointer_contradictions(pages) == [("10_long_runs", "chapter 9 reads what that did to its models' validation "
                                                              "loss", "09_claims")]
    pages["10_long_runs"] = "its validation loss is shown below"
    assert pointer_contradictions(pages) == []
    pages["index"] = "Rerun it: make book."  # the front page without a way to get the code
    assert pointer_contradictions(pages) == [("01_introduction", "the front page says how", "index")]

"""The passage rule: each landmark's similarity blended with its neighbourhood's mean."""

from __future__ import annotations

import numpy as np
import pytest

from lmk_rag.passages import locate_passage, passage_scores


def test_scores_blend_each_landmark_with_its_clipped_neighbourhood():
    sims = np.array([0.1, 0.2, 0.9, 0.3, 0.4, 0.5])
    got = passage_scores(sims, radius=2, peak_weight=0.5)
    # Landmark 0: itself and the two after it; landmark 2: all five around it; the last: three.
    assert got[0] == pytest.approx(0.5 * 0.1 + 0.5 * np.mean([0.1, 0.2, 0.9]))
    assert got[2] == pytest.approx(0.5 * 0.9 + 0.5 * np.mean([0.1, 0.2, 0.9, 0.3, 0.4]))
    assert got[5] == pytest.approx(0.5 * 0.5 + 0.5 * np.mean([0.3, 0.4, 0.5]))


def test_region_prefers_a_matching_neighbourhood_to_an_isolated_peak():
    # A passing mention (0.70) among unrelated landmarks; a section whose landmarks all match (0.66-0.68).
    sims = np.array([0.10, 0.12, 0.70, 0.11, 0.10, 0.20, 0.66, 0.68, 0.67, 0.65, 0.15])
    assert locate_passage(sims, "peak") == 2
    assert locate_passage(sims) == locate_passage(sims, "region")  # the default
    assert locate_passage(sims, "region") in range(6, 10)  # a landmark of the matching section


def test_degenerate_inputs_and_a_bad_rule():
    assert locate_passage(np.array([])) == 0
    assert locate_passage(np.array([0.3])) == 0
    assert list(passage_scores(np.array([0.2, 0.4]), radius=0)) == [0.2, 0.4]
    with pytest.raises(ValueError, match="passage must be one of"):
        locate_passage(np.array([0.1, 0.2]), "best")


def test_eval_refuses_an_unknown_passage_rule_before_loading_a_model():
    from lmk_rag.eval import parse_methods

    with pytest.raises(ValueError, match="passage must be one of"):
        parse_methods("lmk:32", passage="best")

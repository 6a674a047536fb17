"""sdt_fit (seed 002 §5.3): one d′ per labeler across its groups, tested by likelihood ratio against
statsmodels' probit GLM and by simulation."""

from __future__ import annotations

import datetime as dt

import numpy as np
import polars as pl
import pytest
from scipy import stats

from fairmon.transforms.decisions.sdt_fit import sdt_fit_table, shared_d_prime_test

DS = dt.date(2026, 3, 1)


def _glm_deviance(counts: np.ndarray, interaction: bool) -> tuple[float, float]:
    """Deviance of the probit GLM P(label 1) = Φ(−t_g + d′·gold) on item counts (freq weights), with
    one d′ (gold's coefficient) or one per group (gold × group), and the fitted shared d′."""
    import statsmodels.api as sm

    G = counts.shape[0]
    X, y, w = [], [], []
    for g, (tp, fn, fp, tn) in enumerate(counts):
        for gold, label, n in ((1, 1, tp), (1, 0, fn), (0, 1, fp), (0, 0, tn)):
            dummies = np.eye(G)[g]
            gold_cols = dummies * gold if interaction else [gold]
            X.append(np.r_[dummies, gold_cols])
            y.append(label)
            w.append(n)
    fit = sm.GLM(
        np.array(y),
        np.array(X, float),
        family=sm.families.Binomial(sm.families.links.Probit()),
        freq_weights=np.array(w, float),
    ).fit()
    return float(fit.deviance), float(fit.params[G])


def test_the_likelihood_ratio_is_the_probit_glms_deviance_difference():
    """The shared-d′ model is the probit GLM of the label on group intercepts (−t_g) and gold (d′);
    the saturated one adds gold × group. LR = deviance difference, d′ = gold's coefficient."""
    counts = np.array([[300, 200, 150, 1850], [420, 80, 40, 1960], [90, 60, 300, 700]])
    d, lr, df, p = shared_d_prime_test(counts)
    shared, d_glm = _glm_deviance(counts, interaction=False)
    saturated, _ = _glm_deviance(counts, interaction=True)
    assert lr == pytest.approx(shared - saturated, rel=1e-5)
    assert d == pytest.approx(d_glm, abs=1e-4)
    assert df == 2 and p == pytest.approx(stats.chi2.sf(shared - saturated, 2), rel=1e-4)


def test_sdt_fit_table_tests_each_labeler_and_says_why_not():
    """Two labelers: L1 with one d′ (1.5) at two criteria fits; L2 with d′ 0.8 and 2.0 does not;
    L3 has one usable group (the other has 10 gold positives, 6 negatives: below sdt's minimums of 10): not
    tested; a labeler perfect in every group has no finite d′: not tested either. The pooled `*` is left out."""
    rng = np.random.default_rng(4)

    def cell(t, d, npos=800, nneg=3000):
        tp, fp = rng.binomial(npos, stats.norm.sf(t - d)), rng.binomial(nneg, stats.norm.sf(t))
        return [tp, npos - tp, fp, nneg - fp]

    rows = [
        ("L1", "a", cell(0.5, 1.5)), ("L1", "b", cell(1.0, 1.5)),
        ("L2", "a", cell(0.5, 0.8)), ("L2", "b", cell(1.0, 2.0)),
        ("L3", "a", cell(0.5, 1.0)), ("L3", "b", [5, 5, 3, 3]),
        ("*", "a", cell(0.5, 1.2)), ("*", "b", cell(1.0, 1.2)),
    ]  # fmt: skip
    confusion = pl.DataFrame(
        [
            {"attribute": "g", "labeler_id": lab, "group": g, **dict(zip(("tp", "fn", "fp", "tn"), c))}
            for lab, g, c in rows
        ]
    )
    out = {r["labeler_id"]: r for r in sdt_fit_table(confusion, DS, (DS, DS)).iter_rows(named=True)}
    assert set(out) == {"L1", "L2", "L3"}
    assert out["L1"]["fits"] and out["L1"]["d_prime_shared"] == pytest.approx(1.5, abs=0.15)
    assert out["L2"]["fits"] is False and out["L2"]["p_value"] < 1e-6 and out["L2"]["df"] == 1
    assert out["L3"]["fits"] is None and out["L3"]["groups"] == 1 and "nothing to compare" in out["L3"]["reason"]
    perfect = pl.DataFrame(
        [{"attribute": "g", "labeler_id": "P", "group": g, "tp": 50, "fn": 0, "fp": 0, "tn": 200} for g in "ab"]
    )
    (row,) = sdt_fit_table(perfect, DS, (DS, DS)).iter_rows(named=True)
    assert row["fits"] is None and np.isnan(row["p_value"]) and "no finite maximum" in row["reason"]
    with pytest.raises(ValueError, match="2 groups"):
        shared_d_prime_test(np.array([[1, 1, 1, 1]]))


@pytest.mark.coverage
def test_one_d_prime_is_rejected_at_its_level_and_a_difference_is_found():
    """500 labelers with one d′ = 1.2 at three criteria (400 positives, 1,600 negatives a group): the
    test at 0.01 rejects about 1 % (within [0, 0.03]); with d′ 1.0, 1.2 and 1.6 it rejects most."""
    rng = np.random.default_rng(9)

    def labeler(ds_):
        out = []
        for t, d in zip((0.4, 0.9, 1.4), ds_, strict=True):
            tp, fp = rng.binomial(400, stats.norm.sf(t - d)), rng.binomial(1600, stats.norm.sf(t))
            out.append([tp, 400 - tp, fp, 1600 - fp])
        return np.array(out)

    null = np.mean([shared_d_prime_test(labeler((1.2, 1.2, 1.2)))[3] < 0.01 for _ in range(500)])
    alt = np.mean([shared_d_prime_test(labeler((1.0, 1.2, 1.6)))[3] < 0.01 for _ in range(200)])
    assert null <= 0.03 and alt >= 0.8


def test_the_likelihood_gradient_is_the_central_difference():
    from fairmon.transforms.decisions.sdt_fit import log_likelihood, log_likelihood_gradient

    counts = np.array([[500, 300, 600, 2400], [300, 500, 300, 2700], [90, 60, 300, 700]], float)
    x, h = np.array([0.8, 1.3, 0.5, 1.1]), 1e-5
    numeric = [
        (log_likelihood((x + h * e)[:3], np.full(3, (x + h * e)[3]), counts)
         - log_likelihood((x - h * e)[:3], np.full(3, (x - h * e)[3]), counts)) / (2 * h)
        for e in np.eye(4)
    ]  # fmt: skip
    assert log_likelihood_gradient(x[:3], x[3], counts) == pytest.approx(numeric, rel=1e-6)


def test_the_reports_sdt_fit_section_shows_the_test_and_its_answer():
    """The generic section showed the first four numbers (groups, d′, LR, df) and cut off p_value and fits:
    a labeler whose one d′ did not fit (p = 0.0066) was never said so in the report."""
    import datetime as dt

    import polars as pl

    from fairmon.pipelines.report.report_sections import generic_section
    from fairmon.transforms.registry import TABLES

    t = TABLES["sdt_fit"]
    day = dt.date(2026, 1, 3)
    row = {"ds": day, "attribute": "grp", "labeler_id": "L3", "window_start": day, "window_end": day}
    row |= {"groups": 2, "d_prime_shared": 1.9, "lr_statistic": 7.37735, "df": 1, "p_value": 0.00661}
    row |= {"fits": False, "reason": None}
    title, section = generic_section(t, pl.DataFrame([row], schema=t.schema))
    assert section["columns"] == ["attribute", "labeler_id", "groups", "d_prime_shared", "lr_statistic", "df",
                                  "p_value", "fits"]  # fmt: skip
    assert section["rows"][0][-2:] == ["0.0066", "False"]

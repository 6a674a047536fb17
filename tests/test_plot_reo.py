"""fairmon.plot_reo draws what its rows say: each arm's REO at its days, the interval as the band's edges, and the
verdict's line at the rows' reo_threshold (else 1/9, the 80 % rule for two groups)."""

import datetime as dt

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

import fairmon

DAYS = [dt.date(2026, 1, d) for d in (1, 2, 3)]


def _rows(**extra):
    data = {
        "ds": DAYS * 2,
        "arm": ["control"] * 3 + ["treatment"] * 3,
        "attribute": ["gender"] * 6,
        "reo": [0.10, 0.12, 0.08, 0.20, 0.25, 0.22],
        "ci_low": [0.05, 0.07, 0.03, 0.15, 0.18, 0.17],
        "ci_high": [0.15, 0.17, 0.13, 0.26, 0.31, 0.28],
    }
    data.update(extra)
    return pd.DataFrame(data)


def test_lines_bands_and_the_verdict_line_are_the_rows_values():
    ax = fairmon.plot_reo(_rows())
    lines = {line.get_label(): line for line in ax.get_lines()}
    np.testing.assert_allclose(lines["control"].get_ydata(), [0.10, 0.12, 0.08])
    np.testing.assert_allclose(lines["treatment"].get_ydata(), [0.20, 0.25, 0.22])
    threshold = [line for label, line in lines.items() if label.startswith("line:")]
    assert len(threshold) == 1
    np.testing.assert_allclose(threshold[0].get_ydata(), [1 / 9, 1 / 9])
    # each band's polygon spans its arm's interval: the smallest and largest y are ci_low's min and ci_high's max
    bands = [c for c in ax.collections]
    assert len(bands) == 2
    spans = sorted((p.get_paths()[0].vertices[:, 1].min(), p.get_paths()[0].vertices[:, 1].max()) for p in bands)
    np.testing.assert_allclose(spans, [(0.03, 0.17), (0.15, 0.31)])
    plt.close("all")


def test_the_line_follows_the_rows_reo_threshold_and_the_given_axes():
    _, ax = plt.subplots()
    out = fairmon.plot_reo(_rows(reo_threshold=[0.3] * 6), ax=ax)
    assert out is ax
    (threshold,) = [line for line in ax.get_lines() if line.get_label().startswith("line:")]
    np.testing.assert_allclose(threshold.get_ydata(), [0.3, 0.3])
    plt.close("all")


def test_several_attributes_need_one_named_and_a_missing_column_is_named():
    rows = pd.concat([_rows(), _rows().assign(attribute="age")])
    with pytest.raises(ValueError, match="attribute="):
        fairmon.plot_reo(rows)
    ax = fairmon.plot_reo(rows, attribute="age")
    assert len([line for line in ax.get_lines() if not line.get_label().startswith("line:")]) == 2
    with pytest.raises(ValueError, match="no rows of attribute 'sex'"):
        fairmon.plot_reo(rows, attribute="sex")
    with pytest.raises(ValueError, match="ci_high"):
        fairmon.plot_reo(_rows().drop(columns="ci_high"))
    plt.close("all")


@pytest.mark.parametrize("as_text", [False, True])
def test_days_are_ticked_as_days(as_text):
    """Days, never hours, also when ``ds`` was read back from a CSV as text."""
    rows = _rows()
    if as_text:
        rows["ds"] = rows["ds"].astype(str)
    ax = fairmon.plot_reo(rows)
    ax.figure.canvas.draw()
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == ["01-01", "01-02", "01-03"]
    plt.close("all")

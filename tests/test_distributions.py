"""fairmon.transforms.distributions gives scipy.stats' values bit for bit, and
Great Expectations is imported with scipy.stats and altair deferred."""

import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

from fairmon.transforms.distributions import chi2_cdf, chi2_sf, f_sf, ncx2_cdf, norm_ppf, t_ppf

XS = [0.0, -0.0, -1e-300, -1.0, 1e-300, 1e-12, 0.3, 1.0, 2.5, 17.0, 400.0, 1e6, np.inf, -np.inf, np.nan]
DFS = [0.0, -2.0, 0.5, 1, 2, 3, 7.5, 4095, np.inf, np.nan]


def _same(a: float, b: float) -> bool:
    return (np.isnan(a) and np.isnan(b)) or a == b


@pytest.mark.parametrize("q", [0.0, 1e-300, 1e-9, 0.025, 0.5, 0.8, 0.975, 0.995, 1 - 1e-16, 1.0, -0.1, 1.1, np.nan])
def test_norm_ppf_is_scipy_stats(q):
    assert _same(norm_ppf(q), float(stats.norm.ppf(q)))


def test_chi2_tails_are_scipy_stats():
    for x in XS:
        for df in DFS:
            assert _same(chi2_sf(x, df), float(stats.chi2.sf(x, df))), (x, df)
            assert _same(chi2_cdf(x, df), float(stats.chi2.cdf(x, df))), (x, df)


def test_t_ppf_and_f_sf_are_scipy_stats():
    """The few-cluster references (issue 38): t quantiles and F tails."""
    for q in [0.0, 1e-9, 0.025, 0.5, 0.975, 1.0, -0.1, np.nan]:
        for df in DFS:
            assert _same(t_ppf(q, df), float(stats.t.ppf(q, df))), (q, df)
    for x in XS:
        for dfn in [0.0, 1, 3, 7.5, np.inf, np.nan]:
            for dfd in DFS:
                assert _same(f_sf(x, dfn, dfd), float(stats.f.sf(x, dfn, dfd))), (x, dfn, dfd)
    # hand-checkable: t_1 is Cauchy, its 97.5 % quantile tan(0.475π); F(1, d) tail = two-sided t_d tail
    assert abs(t_ppf(0.975, 1) - np.tan(0.475 * np.pi)) < 1e-12
    assert abs(f_sf(t_ppf(0.975, 19) ** 2, 1, 19) - 0.05) < 1e-12


def test_ncx2_cdf_is_scipy_stats():
    for x in XS:
        for df in DFS:
            for nc in [0.0, 1e-13, 0.7, 3.0, 250.0, -1.0, np.inf, np.nan]:
                assert _same(ncx2_cdf(x, df, nc), float(stats.ncx2.cdf(x, df, nc))), (x, df, nc)


def test_known_values():
    """Hand-checkable values: the 97.5 % normal quantile, P(χ²₂ ≥ x) = e^(−x/2)."""
    assert abs(norm_ppf(0.975) - 1.959963984540054) < 1e-15
    assert abs(chi2_sf(3.0, 2) - np.exp(-1.5)) < 1e-15
    assert abs(chi2_cdf(3.0, 2) - (1 - np.exp(-1.5))) < 1e-15


@pytest.mark.slow
def test_gx_imports_with_scipy_stats_and_altair_deferred():
    """In a fresh interpreter, GX's import leaves scipy.stats and altair as
    stand-ins; the first attribute read imports the real module, through the
    stand-in GX holds and through a later ``from scipy import stats``."""
    code = """
import sys
from fairmon.pipelines.checks.gx_import import import_gx, _Deferred
import_gx(False)
assert isinstance(sys.modules["scipy.stats"], _Deferred) and "scipy.stats._stats_py" not in sys.modules
assert isinstance(sys.modules["altair"], _Deferred) and "altair.vegalite" not in sys.modules
from great_expectations.expectations.core import expect_column_kl_divergence_to_be_less_than as kl
assert kl.stats.entropy([0.5, 0.5], [0.25, 0.75]) > 0
assert not isinstance(sys.modules["scipy.stats"], _Deferred)
from scipy import stats
assert stats.norm.ppf(0.5) == 0.0 and stats is sys.modules["scipy.stats"]
assert kl.alt.Chart is sys.modules["altair"].Chart
print("ok")
"""
    env = {"GX_ANALYTICS_ENABLED": "False", "PATH": ""}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.stdout.strip() == "ok", out.stderr[-2000:]


@pytest.mark.slow
def test_gx_imports_with_jsonschema_and_mistune_deferred():
    """In a fresh interpreter, GX's import leaves jsonschema and mistune as
    stand-ins; GX's JSON-schema metric and its Markdown rendering still work
    through them (a valid and an invalid instance, a rendered emphasis)."""
    code = """
import sys
from fairmon.pipelines.checks.gx_import import import_gx, _Deferred
import_gx(False)
assert isinstance(sys.modules["jsonschema"], _Deferred) and "jsonschema.validators" not in sys.modules
assert isinstance(sys.modules["mistune"], _Deferred) and "mistune.markdown" not in sys.modules
from great_expectations.expectations.metrics.column_map_metrics import column_values_match_json_schema as js
js.jsonschema.validate({"a": 1}, {"type": "object"})
try:
    js.jsonschema.validate(1, {"type": "string"})
    raise SystemExit("no error")
except js.jsonschema.ValidationError:
    pass
assert not isinstance(sys.modules["jsonschema"], _Deferred)
from great_expectations.render.view import view
assert view.mistune.markdown("*x*").strip() == "<p><em>x</em></p>"
print("ok")
"""
    env = {"GX_ANALYTICS_ENABLED": "False", "PATH": ""}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.stdout.strip() == "ok", out.stderr[-2000:]


@pytest.mark.slow
def test_gx_import_for_a_spark_run_does_not_end_a_python_c_process():
    """``python -c`` has a ``__main__`` with neither ``__spec__`` nor ``__file__``: there, importing
    ``pyspark.sql.connect`` without Spark Connect's dependencies (grpc) calls ``sys.exit(0)``, and GX
    imports it when PySpark is not hidden (a Spark engine's run), so the process ended at once with exit
    code 0 and published nothing. With Spark Connect hidden the code after the import runs, and GX takes
    Spark Connect as not installed."""
    pytest.importorskip("pyspark")
    code = """
import sys
import pyspark.sql
from fairmon.pipelines.checks.gx_import import import_gx
import_gx(True)
from great_expectations.compatibility import pyspark as compat
assert "pyspark.sql.connect" not in sys.modules and compat.DataFrame is pyspark.sql.DataFrame
print("after the import")
"""
    env = {"GX_ANALYTICS_ENABLED": "False", "PATH": ""}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0 and out.stdout.strip() == "after the import", out.stderr[-2000:]

"""Simulation truths: convergence like 1/√n and 95 % CI coverage (fixed seeds).

Counts are drawn with transforms.simulate.simulate_counts, which is exactly the
distribution of aggregating the simulator's rows (checked in test_simulate.py).
"""

import numpy as np
import pytest

from fairmon.transforms.reo.estimate import estimate_reo, relative_utilities, reo_of_utilities
from fairmon.transforms.simulators.impressions import SimulationSpec, regime_spec, simulate_counts

# Engagement rates of 20-40 % (the default simulator spec and a 3-group case).
CASES = {
    "K2": SimulationSpec(),
    "K3": SimulationSpec(
        rec_share=(0.3, 0.3, 0.4), rec_rate=(0.2, 0.3, 0.4), rand_share=(0.3, 0.3, 0.4), rand_rate=(0.3, 0.25, 0.35)
    ),
}


def _run(spec, n_rec, n_rand, days, seed, method):
    Q, P = spec.true_QP("all")
    U = Q / P
    reo0, du0 = reo_of_utilities(U), relative_utilities(U)
    a, b = simulate_counts(Q, P, n_rec, n_rand, days, np.random.default_rng(seed))
    groups = [str(k) for k in range(spec.K)]
    est = [estimate_reo(groups, a[i], n_rec, b[i], n_rand, ci_method=method) for i in range(days)]
    cover = np.mean([e.ci_low <= reo0 <= e.ci_high for e in est])
    cover_du = np.mean([(e.ci_low_delta_U <= du0) & (du0 <= e.ci_high_delta_U) for e in est], axis=0)
    width = np.mean([e.ci_high - e.ci_low for e in est])
    return cover, cover_du, width


@pytest.mark.coverage
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("n_rec,n_rand", [(20_000, 5_000), (150_000, 43_000)])
def test_delta_coverage_is_nominal_and_paper_form_undercovers(case, n_rec, n_rand):
    days = 3000  # >= 500 required; 3000 keeps the binomial SD of coverage at 0.004
    cov, cov_du, width = _run(CASES[case], n_rec, n_rand, days, seed=11, method="delta")
    cov_p, cov_du_p, width_p = _run(CASES[case], n_rec, n_rand, days, seed=11, method="delta_paper")
    assert 0.93 <= cov <= 0.97
    assert np.all((0.93 <= cov_du) & (cov_du <= 0.97))
    # Same draws, same centre, narrower interval: the paper's diagonal form covers
    # visibly less (measured: 0.927-0.945 against 0.943-0.955).
    assert cov_p <= cov - 0.008
    assert width_p < 0.97 * width
    assert np.all(cov_du_p < cov_du)


@pytest.mark.coverage
def test_error_shrinks_like_one_over_sqrt_n():
    spec = CASES["K2"]
    Q, P = spec.true_QP("all")
    reo0 = reo_of_utilities(Q / P)
    rmse, se = {}, {}
    for n in (2_000, 20_000, 200_000):
        a, b = simulate_counts(Q, P, n, n, 800, np.random.default_rng(n))
        est = [estimate_reo(["0", "1"], a[i], n, b[i], n) for i in range(800)]
        rmse[n] = np.sqrt(np.mean([(e.reo - reo0) ** 2 for e in est]))
        se[n] = np.mean([e.se for e in est])
    # 100x the data -> 10x smaller error; and the delta SE predicts the error.
    assert 8.0 <= rmse[2_000] / rmse[200_000] <= 12.5
    assert 2.6 <= rmse[20_000] / rmse[200_000] <= 3.8
    for n in rmse:
        assert 0.85 <= rmse[n] / se[n] <= 1.2


def test_section_4_1_regimes_scale_p_as_the_paper():
    for regime, scale in (("dense", 1), ("sparse", 0.1), ("very_sparse", 0.01)):
        spec = regime_spec(regime, days=1)
        Q, P = spec.true_QP("all")
        p = np.array([0.01, 0.05]) * scale
        assert P == pytest.approx(p, rel=1e-12) and Q == pytest.approx([10 * p[0], 5 * p[1]], rel=1e-12)
        # complements P(Y = 0, S = k) = (0.25, 0.75)(1 - p1 - p2)
        neg = np.asarray(spec.rand_share) * (1 - np.asarray(spec.rand_rate))
        assert neg == pytest.approx([0.25 * (1 - p.sum()), 0.75 * (1 - p.sum())], rel=1e-12)
        assert spec.random_rows_per_day == spec.rows_per_day


@pytest.mark.coverage
def test_section_4_1_regimes_converge_to_one_third():
    # Same truth (REO = 1/3); less random traffic -> larger error, never a biased centre.
    errors = {}
    for regime in ("dense", "sparse", "very_sparse"):
        spec = regime_spec(regime, rows_per_day=200_000, days=1)
        Q, P = spec.true_QP("all")
        a, b = simulate_counts(Q, P, spec.rows_per_day, spec.random_rows_per_day, 400, np.random.default_rng(5))
        est = np.array(
            [estimate_reo(["0", "1"], a[i], spec.rows_per_day, b[i], spec.random_rows_per_day).reo for i in range(400)]
        )
        errors[regime] = np.sqrt(np.mean((est - 1 / 3) ** 2))
        assert abs(np.median(est) - 1 / 3) < 3 * errors[regime] / np.sqrt(400) + 0.01
    assert errors["dense"] < errors["sparse"] < errors["very_sparse"]

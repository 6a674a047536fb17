"""REO estimators: DESIGN §5 reference values, hand-computed cases, and an
independent matrix implementation of seed 001 Algorithm 1."""

import math

import numpy as np
import pytest
from scipy import stats

from fairmon.transforms.reo.estimate import (
    EIGHTY_PERCENT_RULE_REO,
    delta_u_log_jacobian,
    estimate_reo,
    log_utility_variance,
    naive_reo_missing_as_negative,
    naive_reo_recommended_only,
    relative_utilities,
    reo_log_gradient,
    reo_of_utilities,
)
from fairmon.transforms.simulators.impressions import REGIMES, regime_spec, truth_tables

Z95 = 1.959963984540054


# --- DESIGN §5 reference values -------------------------------------------------


def test_eighty_percent_rule_is_one_ninth():
    assert reo_of_utilities([0.8, 1.0]) == pytest.approx(1 / 9, abs=1e-15)
    assert EIGHTY_PERCENT_RULE_REO == pytest.approx(0.1111, abs=1e-4)


def test_example_3_1_dataset_b_is_one_third_not_two_thirds():
    # The paper prints 2/3 = |U1-U2|/mean; std/mean (ddof=0) gives 1/3.
    assert reo_of_utilities([0.5, 1.0]) == pytest.approx(1 / 3, abs=1e-15)


def test_section_4_1_synthetic_truth_is_one_third():
    p = np.array([0.01, 0.05])
    q = np.array([10 * p[0], 5 * p[1]])
    assert reo_of_utilities(q / p) == pytest.approx(1 / 3, abs=1e-15)
    for regime in REGIMES:  # all three regimes share the truth
        _, reo = truth_tables(regime_spec(regime, days=1))
        assert reo.get_column("reo").to_list() == pytest.approx([1 / 3], abs=1e-12)


def test_scale_invariance():
    U = np.array([0.3, 1.7, 0.9])
    assert reo_of_utilities(U) == pytest.approx(reo_of_utilities(7.5 * U), rel=1e-14)
    assert relative_utilities(U) == pytest.approx(relative_utilities(7.5 * U), rel=1e-14)


# --- hand-computed small table ----------------------------------------------------
# n_rec = 1000 with 100 and 200 positives; n_rand = 1000 with 50 and 200 positives:
# Q = (0.1, 0.2), P = (0.05, 0.2), U = (2, 1), mean 1.5, ΔU = (1/3, -1/3), REO = 1/3.
# g = ∂REO/∂log U = (4/9, -4/9); v = 1/(Q n_rec) + 1/(P n_rand) = (0.03, 0.01);
# Var = (16/81)(0.04) -> SE = 0.8/9. Paper's v = (0.009 + 0.019, 0.004 + 0.004).
# For K = 2, REO = |r-1|/(r+1) with r = U1/U2: dREO/dlog r = 2r/(r+1)^2 = 4/9 (check).

HAND = dict(groups=["a", "b"], n_pos_rec=np.array([100, 200]), n_rec=1000, n_pos_rand=np.array([50, 200]), n_rand=1000)


def test_hand_table_point_estimates():
    e = estimate_reo(**HAND)
    assert e.Q == pytest.approx([0.1, 0.2])
    assert e.P == pytest.approx([0.05, 0.2])
    assert e.U == pytest.approx([2.0, 1.0])
    assert e.delta_U == pytest.approx([1 / 3, -1 / 3])
    assert e.reo == pytest.approx(1 / 3)
    assert e.reason is None
    assert e.verdict == "exceeds" and e.ci_low > 1 / 9  # from the CI: [0.16, 0.51] lies above 1/9


def test_hand_table_delta_se_and_ci():
    e = estimate_reo(**HAND)
    assert reo_log_gradient(e.U) == pytest.approx([4 / 9, -4 / 9])
    assert e.se == pytest.approx(0.8 / 9, rel=1e-12)
    # K = 2: REO-hat = |ΔÛ_1| is folded normal around REO with SD = SE, so the
    # interval inverting ‖ΔÛ‖² is the folded-normal one; here (REO/SE = 3.75) it
    # is within 1e-4 of the delta interval REO ± z·SE.
    assert (e.ci_low, e.ci_high) == pytest.approx(folded_normal_ci(1 / 3, 0.8 / 9, 0.95), rel=1e-9)
    assert e.ci_low == pytest.approx(1 / 3 - Z95 * 0.8 / 9, abs=1e-4)
    assert e.ci_high == pytest.approx(1 / 3 + Z95 * 0.8 / 9, abs=1e-4)
    # ΔU_1 = (r-1)/(r+1) for K = 2: same derivative 4/9.
    assert e.se_delta_U == pytest.approx([0.8 / 9, 0.8 / 9], rel=1e-12)
    assert e.ci_low_delta_U[0] == pytest.approx(1 / 3 - Z95 * 0.8 / 9, rel=1e-9)


def test_hand_table_paper_se():
    e = estimate_reo(**HAND, ci_method="delta_paper")
    assert e.se == pytest.approx(4 / 9 * math.sqrt(0.028 + 0.008), rel=1e-12)
    assert e.se < estimate_reo(**HAND).se


def test_confidence_level_changes_width():
    e90 = estimate_reo(**HAND, level=0.90)
    assert e90.ci_high == pytest.approx(folded_normal_ci(1 / 3, 0.8 / 9, 0.90)[1], rel=1e-9)
    assert e90.ci_high - e90.reo == pytest.approx(1.6448536269514722 * 0.8 / 9, abs=1e-4)


def folded_normal_ci(r_obs: float, se: float, level: float) -> tuple[float, float]:
    """Independent K = 2 reference: REO-hat ~ |N(REO, se²)|; invert P_r(REO-hat ≤ r_obs)."""
    from scipy import optimize

    a = 1 - level

    def F(r):
        return stats.norm.cdf((r_obs - r) / se) - stats.norm.cdf((-r_obs - r) / se)

    lo = 0.0 if F(0) <= 1 - a / 2 else optimize.brentq(lambda r: F(r) - (1 - a / 2), 0, r_obs + 20 * se, xtol=1e-14)
    hi = optimize.brentq(lambda r: F(r) - a / 2, 0, r_obs + 20 * se, xtol=1e-14)
    return lo, hi


# --- independent implementation: Algorithm 1 in matrix form ----------------------


def algorithm1(Q, P, n_rec, n_rand, full):
    """Var(REO) = HᵀGᵀΓGH and Var(ΔU) = diag(GᵀΓG), literally, with Γ = Cov(Û)."""
    U = Q / P
    K, S = len(U), U.sum()
    G = np.array([[K * ((j == k) * S - U[k]) / S**2 for k in range(K)] for j in range(K)])
    dU = K * U / S - 1
    reo = np.sqrt(np.mean(dU**2))
    H = dU / (K * reo)
    if full:  # Cov(log Q̂) = diag(1/(Q n)) - 11ᵀ/n from the multinomial
        C = np.diag(1 / (Q * n_rec) + 1 / (P * n_rand)) - (1 / n_rec + 1 / n_rand)
    else:
        C = np.diag((1 - Q) / (Q * n_rec) + (1 - P) / (P * n_rand))
    Gamma = np.outer(U, U) * C
    Sigma = G.T @ Gamma @ G
    return float(H @ Sigma @ H), np.diag(Sigma)


@pytest.mark.parametrize("method,full", [("delta", True), ("delta_paper", False)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_closed_form_matches_matrix_algorithm_1(method, full, seed):
    rng = np.random.default_rng(seed)
    K = 2 + seed
    Q = rng.uniform(0.05, 0.3, K) / K
    P = rng.uniform(0.05, 0.3, K) / K
    n_rec, n_rand = 50_000, 7_000
    var_reo, var_du = algorithm1(Q, P, n_rec, n_rand, full)
    e = estimate_reo([str(k) for k in range(K)], Q * n_rec, n_rec, P * n_rand, n_rand, ci_method=method)
    assert e.se**2 == pytest.approx(var_reo, rel=1e-9)
    assert e.se_delta_U**2 == pytest.approx(var_du, rel=1e-9)


def test_gradients_match_finite_differences():
    U = np.array([0.7, 1.3, 1.1, 0.4])
    h = 1e-6
    num = np.array(
        [(reo_of_utilities(U * np.exp(h * e)) - reo_of_utilities(U * np.exp(-h * e))) / (2 * h) for e in np.eye(4)]
    )
    assert reo_log_gradient(U) == pytest.approx(num, abs=1e-8)
    assert reo_log_gradient(U).sum() == pytest.approx(0, abs=1e-14)
    numA = np.array(
        [(relative_utilities(U * np.exp(h * e)) - relative_utilities(U * np.exp(-h * e))) / (2 * h) for e in np.eye(4)]
    ).T
    assert delta_u_log_jacobian(U) == pytest.approx(numA, abs=1e-8)


def test_log_utility_variance_rejects_unknown_method():
    with pytest.raises(ValueError, match="ci_method"):
        log_utility_variance(np.array([0.1]), np.array([0.1]), 10, 10, "bootstrap")


# --- undefined cases: NaN with a reason, never an exception ----------------------


def test_zero_random_positives_gives_nan_with_reason():
    e = estimate_reo(["a", "b"], np.array([10, 20]), 100, np.array([0, 5]), 100)
    assert math.isnan(e.reo) and math.isnan(e.se)
    assert "P_k = 0" in e.reason and "a" in e.reason
    assert e.group_reasons[0] == "P_k = 0"
    assert e.verdict == "undefined"


def test_zero_default_positives_keeps_point_estimate_but_no_se():
    e = estimate_reo(["a", "b"], np.array([0, 20]), 100, np.array([5, 5]), 100)
    assert e.U == pytest.approx([0.0, 4.0])
    assert e.reo == pytest.approx(1.0)  # U = (0, 4): std 2, mean 2
    assert math.isnan(e.se) and math.isnan(e.ci_low)
    assert "Q_k = 0" in e.reason


def test_equal_utilities_reo_zero_has_undefined_se():
    e = estimate_reo(["a", "b"], np.array([10, 20]), 100, np.array([10, 20]), 100)
    assert e.reo == 0.0
    assert math.isnan(e.se)
    assert "REO = 0" in e.reason
    assert e.se_delta_U == pytest.approx(
        np.sqrt((delta_u_log_jacobian(e.U) ** 2) @ (1 / (e.Q * 100) + 1 / (e.P * 100)))
    )


def test_no_random_traffic_and_single_group():
    e = estimate_reo(["a", "b"], np.array([10, 20]), 100, np.array([0, 0]), 0)
    assert math.isnan(e.reo) and "no random traffic" in e.reason
    e1 = estimate_reo(["a"], np.array([10]), 100, np.array([5]), 100)
    assert math.isnan(e1.reo) and "K = 1" in e1.reason


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(groups=["a"], n_pos_rec=np.array([1, 2]), n_rec=5, n_pos_rand=np.array([1]), n_rand=5), "shape"),
        (
            dict(groups=["a", "b"], n_pos_rec=np.array([-1, 2]), n_rec=5, n_pos_rand=np.array([1, 1]), n_rand=5),
            "non-negative",
        ),
        (dict(groups=["a", "b"], n_pos_rec=np.array([4, 2]), n_rec=5, n_pos_rand=np.array([1, 1]), n_rand=5), "exceed"),
    ],
)
def test_malformed_input_raises(kwargs, match):
    with pytest.raises(ValueError, match=match):
        estimate_reo(**kwargs)


def test_bad_level_and_method_raise():
    with pytest.raises(ValueError, match="level"):
        estimate_reo(**HAND, level=1.5)
    with pytest.raises(ValueError, match="ci_method"):
        estimate_reo(**HAND, ci_method="nope")


# --- naive diagnostics ----------------------------------------------------------


def test_naive_recommended_only_hand_value():
    # rates within default traffic: 100/400 = 0.25, 200/600 = 1/3 -> REO = (1/24)/(7/24) = 1/7
    assert naive_reo_recommended_only(np.array([100, 200]), np.array([400, 600])) == pytest.approx(1 / 7)


def test_naive_missing_as_negative_hand_value():
    # Q = (0.1, 0.2); group exposure shares in random traffic (0.25, 0.75) -> U = (0.4, 0.2667) -> REO = 0.2
    assert naive_reo_missing_as_negative(np.array([100, 200]), 1000, np.array([250, 750]), 1000) == pytest.approx(0.2)


def test_near_zero_shape_repeated_with_the_same_values_is_the_shape_formed_anew():
    # The reo table and reo_ab's projection rows ask for the same arm's shape: the second call returns
    # the first's, equal to forming it again (after other calls pushed it out); other values, or a
    # caller's later edit of its array, are not confused with it.
    from fairmon.transforms.reo.intervals_near_zero import NEAR_ZERO_SHAPES_KEPT, near_zero_shape

    rng = np.random.default_rng(11)
    dU, factor = rng.normal(0, 0.05, 40), rng.normal(0, 0.01, (6, 40))
    first = near_zero_shape(dU, None, factor=factor)
    assert near_zero_shape(dU.copy(), None, factor=factor.copy()) is first
    for i in range(NEAR_ZERO_SHAPES_KEPT):
        assert near_zero_shape(dU, None, factor=factor * (2 + i)) is not first
    fresh = near_zero_shape(dU, None, factor=factor)
    assert fresh is not first
    for name in ("K", "norm", "scale", "t_up"):
        assert getattr(first, name) == getattr(fresh, name)
    for name in ("lam", "proj", "roots"):
        np.testing.assert_array_equal(getattr(first, name), getattr(fresh, name))
    assert first.interval(0.95) == fresh.interval(0.95)
    factor[0, 0] += 0.01  # the caller edits its array: a new shape, not the kept one
    edited = near_zero_shape(dU, None, factor=factor)
    assert edited is not fresh and edited.norm == fresh.norm
    assert near_zero_shape(dU, factor.T @ factor) is not edited  # the same Σ given whole is another entry
    assert near_zero_shape(np.array([0.1]), np.eye(1)) is None  # K < 2
    # a zero of the other sign is equal in value but may give other bits: not the kept shape
    z = np.zeros(40)
    plus = near_zero_shape(dU, None, factor=np.vstack([factor, z]))
    assert near_zero_shape(dU, None, factor=np.vstack([factor, -z])) is not plus
    assert near_zero_shape(dU, None, factor=np.vstack([factor, z])) is plus


def test_a_reason_names_ten_groups_and_counts_the_rest():
    """Twelve groups without random positives: the day's reason names the first ten and counts two more;
    each group's own reason says P_k = 0 (a day of thousands of thin groups keeps a readable reason)."""
    from fairmon.transforms.reo.estimate import estimate_reo

    groups = [f"g{i:02d}" for i in range(14)]
    b = np.array([5, 5] + [0] * 12)
    e = estimate_reo(groups, np.full(14, 10), 1000, b, 500)
    assert "for group(s) g02, g03, g04, g05, g06, g07, g08, g09, g10, g11 and 2 more (each group's row" in e.reason
    assert list(e.group_reasons[2:]) == ["P_k = 0"] * 12 and math.isnan(e.reo)
    few = estimate_reo(groups, np.full(14, 10), 100_000, np.full(14, 10), 50_000)  # every group below 30
    assert "small group(s) g00, g01, g02, g03, g04, g05, g06, g07, g08, g09 and 4 more" in few.reason

"""The output-table registry: every table fairmon publishes, declared once.

Each :class:`Table` names its key, every column with its Polars type, unit
and meaning, the Great Expectations suite that gates it, and the paper or
DESIGN section it comes from. Everything else is derived from here: the
Polars schemas the estimators build their frames with (e.g.
:data:`fairmon.transforms.reo.reo_tables.REO_SCHEMA`), the DuckDB DDL, day
replacement and ``<table>_published`` views
(:mod:`fairmon.pipelines.storage.ddl`), the gate's table list, and the data
dictionary ``docs/tables.md``.

Pure declarations (no I/O), so transforms may import it. Column order is the
order the frames and files have. ``run_id`` (:data:`RUN_ID`) is added to every
table's rows at publish time by the flow, not by the estimators.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import polars as pl

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Column:
    """One column: ``name`` (an SQL identifier), Polars ``dtype``, ``unit``
    (``-`` for labels and flags) and ``meaning`` (one sentence)."""

    name: str
    dtype: pl.DataType
    unit: str
    meaning: str


@dataclass(frozen=True)
class Table:
    """One output table, Hive-partitioned by ``ds`` (DESIGN §3).

    ``columns`` are those the estimators produce (``ds`` first); ``key`` is
    the set of columns that identify a row within the whole table; ``suite``
    is the expectation suite in ``expectations/`` that gates the day's rows;
    ``published_view`` says whether DuckDB exposes ``<name>_published``.
    """

    name: str
    description: str
    source: str
    key: tuple[str, ...]
    columns: tuple[Column, ...]
    suite: str
    published_view: bool = True

    def __post_init__(self) -> None:
        names = [c.name for c in self.columns]
        for ident in (self.name, *names):
            if not IDENTIFIER.fullmatch(ident):
                raise ValueError(f"table {self.name!r}: {ident!r} is not an identifier [A-Za-z_][A-Za-z0-9_]*")
        if len(set(names)) != len(names):
            raise ValueError(f"table {self.name!r}: duplicate column names")
        if names[:1] != ["ds"]:
            raise ValueError(f"table {self.name!r}: the first column must be ds (the partition)")
        if not set(self.key) <= set(names):
            raise ValueError(f"table {self.name!r}: key {self.key} names unknown columns")

    @property
    def schema(self) -> dict[str, pl.DataType]:
        """{column: Polars dtype} of the rows the estimators produce (without ``run_id``)."""
        return {c.name: c.dtype for c in self.columns}

    @property
    def stored_columns(self) -> tuple[Column, ...]:
        """The columns as stored: the estimators' columns plus :data:`RUN_ID`."""
        return (*self.columns, RUN_ID)


def _c(name: str, dtype: pl.DataType, unit: str, meaning: str) -> Column:
    return Column(name, dtype, unit, meaning)


S, I, F, B, D = pl.String, pl.Int64, pl.Float64, pl.Boolean, pl.Date

#: Added to every row at publish time: the run that wrote it.
RUN_ID = _c(
    "run_id", S, "-", "The run that wrote the row; a day is consistent when every table carries the same run_id."
)

_DS = _c("ds", D, "date (UTC)", "The log day the row describes (the partition).")
_ARM = _c("arm", S, "-", "Experiment arm of default traffic; `all` without an experiment.")
_ATTR = _c("attribute", S, "-", "Sensitive attribute defining the grouping (a configured attribute column).")
_GROUP = _c("group", S, "-", "Value of the attribute; `(missing)` for rows whose value is null.")
_REASON = _c("reason", S, "-", "Why a value is NaN or flagged (null when every value is defined).")
_CI_LOW = _c("ci_low", F, "as the estimate", "Lower bound of the confidence interval at `level`.")
_CI_HIGH = _c("ci_high", F, "as the estimate", "Upper bound of the confidence interval at `level`.")
_CLUSTER_BY = _c(
    "cluster_by",
    S,
    "-",
    "Rows sharing this id are one cluster in the interval (`request_id`, `user_id`); `none`: independent rows "
    "(config `estimation.cluster_by`).",
)
_DESIGN_EFFECT = _c(
    "design_effect",
    F,
    "ratio",
    "Cluster-robust ÷ multinomial variance of the estimate (delta method); 1 for independent rows.",
)
_LEVEL = _c("level", F, "probability", "Confidence level of the interval (config `estimation.confidence_level`).")
_WIN_START = _c("window_start", D, "date", "First day of the rows the row was computed from.")
_WIN_END = _c("window_end", D, "date", "Last day of the rows the row was computed from.")
_MODEL = _c("model", S, "-", "Model name/version of the score log.")
_T = _c("t", F, "score", "Decision threshold of the model (config `scores.thresholds`).")
_BANDWIDTH = _c("d", F, "score", "Bandwidth: rows with |s − t| < d enter the local regression.")

TABLES: dict[str, Table] = {
    t.name: t
    for t in (
        Table(
            "group_counts",
            "Per-group counts of logged user-item pairs and positives, per traffic and arm.",
            "DESIGN §3; seed 001 §3 (Q_k, P_k are n_pos shares of these counts)",
            ("ds", "source", "traffic", "arm", "attribute", "group"),
            (
                _DS,
                _c("source", S, "-", "Input the counts come from (`impressions`)."),
                _c("traffic", S, "-", "Traffic: `default`, `random` or another named stage such as `post_recall`."),
                _c("arm", S, "-", "Experiment arm; `all` for random traffic, which every arm shares."),
                _ATTR,
                _GROUP,
                _c("n", I, "user-item pairs", "Logged pairs of the group in this traffic (and window, for random)."),
                _c(
                    "n_pos",
                    I,
                    "user-item pairs",
                    "Of those, pairs with label Y = 1 (`label_rule` over the signals).",
                ),
                _c(
                    "window_start",
                    D,
                    "date",
                    "First day of the rows counted (random traffic: of the rows and pools the window used).",
                ),
                _c(
                    "window_end",
                    D,
                    "date",
                    "Last day of the rows counted (random traffic: a used pool's declared end; after ds = look-ahead).",
                ),
            ),
            "group_counts",
        ),
        Table(
            "reo_group",
            "Per-group RTPR utility U_k and relative utility ΔU_k with a confidence interval.",
            "seed 001 eqs. 3, 4, 7; Algorithm 1 (delta method)",
            ("ds", "arm", "attribute", "group"),
            (
                _DS,
                _ARM,
                _ATTR,
                _GROUP,
                _c("n_rec", I, "user-item pairs", "Default-traffic pairs of the arm in the group."),
                _c("n_rand", I, "user-item pairs", "Random-traffic pairs of the group in the window."),
                _c("n_pos_rec", I, "user-item pairs", "Positive default-traffic pairs of the group."),
                _c("n_pos_rand", I, "user-item pairs", "Positive random-traffic pairs of the group."),
                _c("P", F, "share", "P_k = positives of the group in random traffic / |D_rand| (seed 001 eq. 4)."),
                _c("Q", F, "share", "Q_k = positives of the group in default traffic / |D_rec| (seed 001 eq. 4)."),
                _c("U", F, "ratio", "RTPR utility U_k = Q_k / P_k (seed 001 eq. 4)."),
                _c("delta_U", F, "ratio", "Relative utility ΔU_k = U_k / mean(U) − 1 (seed 001 eqs. 3, 7)."),
                _c("se_delta_U", F, "ratio", "Standard error of ΔU_k by `ci_method`."),
                _CI_LOW,
                _CI_HIGH,
                _c("ci_method", S, "-", "Interval method: delta, delta_paper or a bootstrap (config)."),
                _REASON,
                _c(
                    "small_group",
                    B,
                    "-",
                    "Fewer than `min_expected_positives` positives in default or random traffic (DESIGN §4.1).",
                ),
                _c("small_group_reason", S, "-", "Names the small group and its counts; null when not small."),
            ),
            "reo_group",
        ),
        Table(
            "reo",
            "Ranking-based Equal Opportunity per attribute and arm, with a confidence interval.",
            "seed 001 eq. 19, Algorithm 1; DESIGN §4.1",
            ("ds", "arm", "attribute"),
            (
                _DS,
                _ARM,
                _ATTR,
                _c("K", I, "groups", "Number of groups of the attribute entering the REO."),
                _c("reo", F, "ratio", "REO = std(U)/mean(U), population std (seed 001 eq. 19)."),
                _c("se", F, "ratio", "Standard error of REO by `ci_method`."),
                _CI_LOW,
                _CI_HIGH,
                _c("n_rec", I, "user-item pairs", "Default-traffic pairs of the arm, |D_rec|."),
                _c("n_rand", I, "user-item pairs", "Random-traffic pairs in the window, |D_rand|."),
                _c("rand_window_start", D, "date", "First day of the random traffic actually used."),
                _c("rand_window_end", D, "date", "Last day of the random traffic actually used."),
                _c("ci_method", S, "-", "Interval method: delta, delta_paper or a bootstrap (config)."),
                _LEVEL,
                _c(
                    "reo_bc",
                    F,
                    "ratio",
                    "Bias-corrected REO: sqrt(max(0, REO² − tr Var(ΔÛ)/K)) (DESIGN §4.1).",
                ),
                _c(
                    "parity_stat",
                    F,
                    "χ²",
                    "Wald statistic of parity (all U_k equal), on the log-utility contrasts (DESIGN §4.1).",
                ),
                _c("parity_df", I, "degrees of freedom", "Degrees of freedom of the parity test, K − 1."),
                _c("parity_p_value", F, "probability", "p-value of the parity test (χ² on K − 1 df)."),
                _c(
                    "reo_threshold",
                    F,
                    "ratio",
                    "The line the verdict uses: 1/9 (the 80 % rule) for K = 2; config `reo_threshold` for K > 2.",
                ),
                _c(
                    "verdict_80pct",
                    S,
                    "-",
                    "From the CI: `exceeds` (ci_low > line), `within` (ci_high ≤ line), `inconclusive`, `undefined`.",
                ),
                _c(
                    "n_small_groups",
                    I,
                    "groups",
                    "Groups below `min_expected_positives` (verdict inconclusive at best).",
                ),
                _c(
                    "look_ahead",
                    B,
                    "-",
                    "Some random rows may come from after ds (a pooled file under `pool_policy = overlap`).",
                ),
                _c("reo_naive_recommended_only", F, "ratio", "Diagnostic: REO from default traffic alone (biased)."),
                _c("reo_naive_missing_as_negative", F, "ratio", "Diagnostic: REO treating unshown pairs as negatives."),
                _REASON,
                _CLUSTER_BY,
                _DESIGN_EFFECT,
            ),
            "reo",
        ),
        Table(
            "reo_ab",
            "A/B differences of REO and of ΔU_k between a treatment and its control, by method.",
            "seed 001 §3.4, Algorithms 2–4; DESIGN §4.1 (joint delta method)",
            ("ds", "attribute", "control", "treatment", "metric", "method"),
            (
                _DS,
                _ATTR,
                _c("control", S, "-", "Control arm."),
                _c("treatment", S, "-", "Treatment arm."),
                _c("metric", S, "-", "`reo`, or `delta_U:<group>` for a group's relative utility."),
                _c("diff", F, "ratio", "metric(treatment) − metric(control)."),
                _c("se", F, "ratio", "Standard error of the difference by `method`."),
                _CI_LOW,
                _CI_HIGH,
                _c("p_value", F, "probability", "Two-sided p-value of no difference."),
                _c("method", S, "-", "delta (joint), delta_paper, partition or bootstrap."),
                _c("df", F, "degrees of freedom", "Degrees of freedom of the t reference (partition); NaN otherwise."),
                _LEVEL,
                _REASON,
                _c(
                    "q_value",
                    F,
                    "probability",
                    "Benjamini–Hochberg q-value over the day's p-values of one method (pairs, attributes, metrics).",
                ),
                _CLUSTER_BY,
                _DESIGN_EFFECT,
            ),
            "reo_ab",
        ),
        Table(
            "threshold_prevalence",
            "Outcome rate at a model's decision threshold per group, and the implied cost ratio.",
            "seed 002 eqs. 6, 8–11; DESIGN §4.2",
            ("ds", "model", "attribute", "group", "t", "d"),
            (
                _DS,
                _MODEL,
                _ATTR,
                _GROUP,
                _T,
                _BANDWIDTH,
                _WIN_START,
                _WIN_END,
                _c("n_window", I, "rows", "Scored rows with |s − t| < d and a known outcome."),
                _c(
                    "n_eff",
                    F,
                    "rows",
                    "Kish effective rows of β0: 1/Σ lᵢ² over the fit's equivalent-kernel weights (β0 = Σ lᵢ yᵢ).",
                ),
                _c(
                    "prevalence_at_threshold",
                    F,
                    "probability",
                    "β0 = E[Y | s = t], tricube-weighted local linear fit, clipped to [0, 1].",
                ),
                _c("se", F, "probability", "Heteroskedasticity-robust (HC) standard error of the fitted β0."),
                _c("ci_low", F, "probability", "Lower bound of β0's interval at `level`; inside [0, 1]."),
                _c("ci_high", F, "probability", "Upper bound of β0's interval; inside [0, 1], above ci_low."),
                _c(
                    "ci_method",
                    S,
                    "-",
                    "hc_normal (β0 ± z·HC SE) or wilson_neff (Wilson on n_eff: small, all-equal or rare-event"
                    " windows); robust_… when built around the bias-corrected (local quadratic) fit.",
                ),
                _c("implied_cost_ratio", F, "ratio", "c = (1 − β0)/β0 (seed 002 eq. 6)."),
                _c(
                    "cost_ratio_ci_low",
                    F,
                    "ratio",
                    "Lower bound of c's interval (β0's bounds carried through).",
                ),
                _c("cost_ratio_ci_high", F, "ratio", "Upper bound of c's interval; inf when ci_low is 0."),
                _c("naive_window_mean", F, "probability", "Mean outcome in the window, unweighted (seed 002 eq. 9)."),
                _c("slope", F, "probability per score unit", "β1, the local slope of the outcome rate at t."),
                _c("prevalence_half_d", F, "probability", "β0 fitted again with half the bandwidth, d/2."),
                _c("se_half_d", F, "probability", "SE behind the d/2 estimate's interval (HC, or Wilson width/2z)."),
                _c(
                    "bandwidth_flag",
                    B,
                    "-",
                    "β0 at d and at d/2 differ by more than the larger of their SEs: β0 may be biased, d too wide.",
                ),
                _c("hc", S, "-", "Which HC variance estimator gave `se` (HC0, HC1 or HC3)."),
                _REASON,
            ),
            "threshold_prevalence",
        ),
        Table(
            "threshold_prevalence_diff",
            "Differences in prevalence at the threshold between pairs of groups.",
            "seed 002 §5.1; DESIGN §4.2",
            ("ds", "model", "attribute", "group_a", "group_b", "t", "d"),
            (
                _DS,
                _MODEL,
                _ATTR,
                _c("group_a", S, "-", "First group of the pair."),
                _c("group_b", S, "-", "Second group of the pair."),
                _T,
                _BANDWIDTH,
                _c("diff", F, "probability", "Prevalence at the threshold of group_a minus that of group_b."),
                _c("se", F, "probability", "√(se_a² + se_b²) from the groups' HC SEs (independent groups)."),
                _c(
                    "ci_low",
                    F,
                    "probability",
                    "Lower bound at `level`: the groups' intervals combined by MOVER (Newcombe).",
                ),
                _c("ci_high", F, "probability", "Upper bound at `level` (MOVER)."),
                _c(
                    "p_value",
                    F,
                    "probability",
                    "Two-sided p-value of no difference: below α exactly when the level-(1 − α) interval excludes 0.",
                ),
                _c(
                    "q_value",
                    F,
                    "probability",
                    "Benjamini–Hochberg q-value over all of the day's p-values in this table (NaN p excluded).",
                ),
                _REASON,
            ),
            "threshold_prevalence_diff",
        ),
        Table(
            "sdt",
            "Labelers' signal-detection parameters against gold labels, per group (pooled `*` and per labeler).",
            "seed 002 §5.3, eq. 12; DESIGN §4.3",
            ("ds", "attribute", "group", "labeler_id"),
            (
                _DS,
                _ATTR,
                _GROUP,
                _c("labeler_id", S, "-", "Labeler, or `*` for all labelers pooled."),
                _WIN_START,
                _WIN_END,
                _c("n_pos", I, "items", "Gold-positive (violating) items labeled."),
                _c("n_neg", I, "items", "Gold-negative items labeled."),
                _c("fpr", F, "probability", "False-positive rate among gold negatives."),
                _c("fnr", F, "probability", "False-negative rate among gold positives."),
                _c("prevalence", F, "probability", "φ = mean gold label."),
                _c("criterion_t", F, "standard deviations", "Criterion t = Φ⁻¹(1 − FPR)."),
                _c("se_t", F, "standard deviations", "Standard error of t (delta method)."),
                _c("criterion_t_ci_low", F, "standard deviations", "Lower bound of t's interval (by `ci_method`)."),
                _c("criterion_t_ci_high", F, "standard deviations", "Upper bound of t's interval; may be inf."),
                _c("d_prime", F, "standard deviations", "d′ = t − Φ⁻¹(FNR)."),
                _c("se_d_prime", F, "standard deviations", "Standard error of d′ (delta method)."),
                _c("d_prime_ci_low", F, "standard deviations", "Lower bound of d′'s interval; may be −inf."),
                _c("d_prime_ci_high", F, "standard deviations", "Upper bound of d′'s interval; may be inf."),
                _c("implied_threshold", F, "probability", "1/(1 + ((1−φ)/φ)·exp(−t·d′ + d′²/2)) (seed 002 eq. 12)."),
                _c("implied_threshold_ci_low", F, "probability", "Lower bound of the implied threshold's interval."),
                _c("implied_threshold_ci_high", F, "probability", "Upper bound of the implied threshold's interval."),
                _c("cost_ratio", F, "ratio", "c = ((1−φ)/φ)·exp(−t·d′ + d′²/2) (seed 002 eq. 12)."),
                _c("cost_ratio_ci_low", F, "ratio", "Lower bound of the cost ratio's interval; may be 0."),
                _c("cost_ratio_ci_high", F, "ratio", "Upper bound of the cost ratio's interval; may be inf."),
                _c(
                    "ci_method",
                    S,
                    "-",
                    "delta, or exact (Clopper–Pearson bounds carried through; a cell below `min_errors`).",
                ),
                _c("corrected", B, "-", "A rate was 0 or 1 and the log-linear correction (+0.5 per cell) was used."),
                _c(
                    "p_vs_pool",
                    F,
                    "probability",
                    "p-value: labeler's log cost ratio vs the other labelers' (Wald; interval overlap if exact).",
                ),
                _c(
                    "q_value",
                    F,
                    "probability",
                    "Benjamini–Hochberg q-value over the day's p_vs_pool values (NaN p excluded).",
                ),
                _REASON,
            ),
            "sdt",
        ),
        Table(
            "reo_stage",
            "Stage-wise diagnosis: recall, ranking and system RTPR utilities, ΔU and REO per group.",
            "seed 001 App. I.4; DESIGN §4.4",
            ("ds", "arm", "attribute", "stage", "group"),
            (
                _DS,
                _ARM,
                _ATTR,
                _c("stage", S, "-", "`recall` (post-recall ÷ random), `ranking` (default ÷ post-recall) or `system`."),
                _GROUP,
                _c("U", F, "ratio", "Stage utility: U^recall = Q^pr/P, U^rank = Q^rec/Q^pr, U^sys = Q^rec/P."),
                _c("delta_U", F, "ratio", "Relative utility ΔU_k = U_k/mean(U) − 1 of the stage."),
                _c("se_delta_U", F, "ratio", "Delta-method SE of ΔU_k (two independent samples)."),
                _CI_LOW,
                _CI_HIGH,
                _c("reo", F, "ratio", "REO of the stage's utilities (std/mean)."),
                _c("reo_se", F, "ratio", "Delta-method SE of the stage REO."),
                _c("reo_ci_low", F, "ratio", "Lower bound of the stage REO's interval (valid near 0, DESIGN §4.1)."),
                _c("reo_ci_high", F, "ratio", "Upper bound of the stage REO's interval."),
                _LEVEL,
                _REASON,
            ),
            "reo_stage",
        ),
        Table(
            "rsp",
            "Ranking-based statistical parity: exposure share in recommendations over share in the pool.",
            "seed 001 App. H.1, eqs. 24–26; DESIGN §4.4",
            ("ds", "arm", "attribute", "group"),
            (
                _DS,
                _ARM,
                _ATTR,
                _GROUP,
                _c("share_rec", F, "share", "Group's share of the default-traffic rows of the arm."),
                _c("share_pool", F, "share", "Group's share of the candidate pool (random-traffic rows)."),
                _c(
                    "U", F, "ratio", "share_rec/share_pool over its mean across groups (the seed's U_k up to P(R = 1))."
                ),
                _c("delta_U", F, "ratio", "Additive ΔU_k = U_k − mean(U) on that scale (eq. 25)."),
                _c("se_delta_U", F, "ratio", "Delta-method SE of ΔU_k."),
                _c("rsp", F, "ratio", "RSP = std(U)/mean(U) (eq. 26), scale-free."),
                _c("se", F, "ratio", "Delta-method SE of RSP."),
                _CI_LOW,
                _CI_HIGH,
                _LEVEL,
                _REASON,
            ),
            "rsp",
        ),
        Table(
            "user_precision",
            "User-side precision per user group (share of positives in default traffic) and its disparity.",
            "seed 001 App. H.2, eq. 27; DESIGN §4.4",
            ("ds", "arm", "attribute", "group"),
            (
                _DS,
                _ARM,
                _c("attribute", S, "-", "User attribute (config `estimation.user_attributes`)."),
                _GROUP,
                _c("n", I, "user-item pairs", "Default-traffic rows of users in the group."),
                _c("n_pos", I, "user-item pairs", "Of those, rows with Y = 1."),
                _c("precision", F, "probability", "n_pos / n (seed 001 eq. 27)."),
                _c("se", F, "probability", "Binomial SE of the precision."),
                _CI_LOW,
                _CI_HIGH,
                _c("disparity", F, "ratio", "std/mean of the groups' precisions."),
                _c("disparity_se", F, "ratio", "Delta-method SE of the disparity (independent binomials)."),
                _c("disparity_ci_low", F, "ratio", "Lower bound of the disparity's interval."),
                _c("disparity_ci_high", F, "ratio", "Upper bound of the disparity's interval."),
                _LEVEL,
                _REASON,
            ),
            "user_precision",
        ),
        Table(
            "group_envy",
            "Group envy per user attribute and ordered pair (target group, donor group) from swap traffic.",
            "seed 004 App. B, eq. 6, Def. B.1, Lemma 4, Prop. 2; DESIGN §4.7",
            ("ds", "attribute", "group", "donor_group"),
            (
                _DS,
                _c("attribute", S, "-", "User attribute (config `envy.attributes`)."),
                _c("group", S, "-", "Target users' group g."),
                _c("donor_group", S, "-", "Group g' whose users' policies served the swap rows."),
                _c("n_cross", I, "rows", "Swap rows of the day: users of g served by policies of g'."),
                _c(
                    "n_same", I, "rows", "Swap rows of the day: users of g served by policies of g (same-group donors)."
                ),
                _c("U_cross", F, "mean reward", "U(g, g'): mean reward of the day's (g, g') swap rows (eq. 6)."),
                _c("U_same", F, "mean reward", "U(g, g): mean reward of the day's (g, g) swap rows (eq. 6 at g' = g)."),
                _c(
                    "diff",
                    F,
                    "mean reward",
                    "U_cross − U_same (Def. B.1): > 0: g gains from the policies of g'; 0 on the diagonal.",
                ),
                _c("se", F, "mean reward", "Standard error of diff (independent binomial rows)."),
                _CI_LOW,
                _CI_HIGH,
                _c(
                    "p_value", F, "probability", "One-sided p-value of H0: diff ≤ 0 (normal test); NaN on the diagonal."
                ),
                _c("q_value", F, "probability", "Benjamini–Hochberg q-value over the attribute's pairs of the day."),
                _c("window_start", D, "date", "First day of the audit (config `envy.start`): the bounds accumulate."),
                _c("window_n_cross", I, "rows", "(g, g') swap rows accumulated since window_start."),
                _c("window_n_same", I, "rows", "(g, g) swap rows accumulated since window_start."),
                _c("anytime_lower", F, "mean reward", "Lower bound of diff valid at every day at once (Lemma 4)."),
                _c("anytime_upper", F, "mean reward", "Upper bound of diff valid at every day at once (Lemma 4)."),
                _c("epsilon", F, "mean reward", "ε of the verdict (config `envy.epsilon`)."),
                _c(
                    "verdict",
                    S,
                    "-",
                    "`envy` (anytime_lower > 0), `eps_envy_free` (anytime_upper ≤ ε; always on the diagonal) "
                    "or `undecided`.",
                ),
                _LEVEL,
                _c(
                    "n_own_policy",
                    I,
                    "rows",
                    "Diagnostic, not Def. B.1: default-traffic (own-policy) rows of g of the day.",
                ),
                _c(
                    "U_own_policy",
                    F,
                    "mean reward",
                    "Diagnostic, not Def. B.1: mean reward of g's own-policy rows of the day.",
                ),
                _c("diff_own_policy", F, "mean reward", "Diagnostic, not Def. B.1: U_cross − U_own_policy."),
            ),
            "group_envy",
        ),
        Table(
            "envy_user",
            "Per target user: OCEF's certificate from the accumulated own-policy and swap rows.",
            "seed 004 Alg. 1 lines 7–9, Lemma 4, Alg. 2; DESIGN §4.7",
            ("ds", "user_id"),
            (
                _DS,
                _c("user_id", S, "-", "Target user (a user with swap rows since window_start)."),
                _c("window_start", D, "date", "First day of the audit (config `envy.start`)."),
                _c("n_donors", I, "users", "Donors whose policies served the user."),
                _c("n_own", I, "rows", "Own-policy rows accumulated."),
                _c("mean_own", F, "mean reward", "Mean reward under the user's own policy."),
                _c("lower_own", F, "mean reward", "Lemma 4 lower bound of the own policy's mean."),
                _c("upper_own", F, "mean reward", "Lemma 4 upper bound of the own policy's mean."),
                _c("best_donor_mean", F, "mean reward", "Largest mean reward under a donor's policy."),
                _c("max_donor_lower", F, "mean reward", "Largest lower bound among the donors."),
                _c("max_donor_upper", F, "mean reward", "Largest upper bound among the donors."),
                _c("delta_user", F, "probability", "δ of this certificate: δ/(3·targets) (Alg. 2 line 4)."),
                _c("decision", S, "-", "`envy`, `eps_no_envy` or `undecided` (OCEF's stopping rules)."),
                _REASON,
            ),
            "envy_user",
        ),
        Table(
            "envy_audit",
            "The day's AUDIT verdict on the whole system: (ε, γ, λ)-envy-free, not envy-free, or undecided.",
            "seed 004 Alg. 2, Th. 2, Def. 3.2; DESIGN §4.7",
            ("ds", "window_start"),
            (
                _DS,
                _c("window_start", D, "date", "First day of the audit (config `envy.start`)."),
                _c("M_tilde", I, "users", "Target users AUDIT needs: ⌈log(3/δ)/λ⌉."),
                _c("K", I, "users", "Donors per target AUDIT needs: ⌈log(3M̃/δ)/log(1/(1−γ))⌉."),
                _c("targets", I, "users", "Target users logged since window_start."),
                _c("min_donors", I, "users", "Fewest donors of a target."),
                _c("design_ok", B, "-", "Enough targets and donors per target (uniform draws are assumed)."),
                _c("design_reason", S, "-", "What the logged design lacks, or that it suffices."),
                _c("n_envy", I, "users", "Targets certified envious."),
                _c("n_eps_no_envy", I, "users", "Targets certified ε-free of envy."),
                _c("n_undecided", I, "users", "Targets not yet decided."),
                _c("epsilon", F, "mean reward", "ε (config `envy.epsilon`)."),
                _c("delta", F, "probability", "δ of the audit (config `envy.delta`)."),
                _c(
                    "lambda_share", F, "share", "λ: share of users allowed to be (ε, γ)-envious (config `envy.lambda`)."
                ),
                _c("gamma_share", F, "share", "γ: share of other users a user may envy (config `envy.gamma`)."),
                _c(
                    "verdict",
                    S,
                    "-",
                    "`not_envy_free` (a target is envious), `envy_free` (certified (ε, γ, λ)) or `undecided`.",
                ),
            ),
            "envy_audit",
        ),
        Table(
            "reach_user",
            "Per user of a model snapshot: how many items the user can make the recommender show (discovery).",
            "seed 003 Def. 1 (reachability); DESIGN §4.8 after Curmei, Dean and Recht (ICML 2021)",
            ("ds", "user_id"),
            (
                _DS,
                _c("user_id", S, "-", "User of the snapshot."),
                _c(
                    "attributes",
                    S,
                    "JSON",
                    "The user's attributes {attribute: group} (config `reach.user_attributes`).",
                ),
                _c("n_targets", I, "items", "|T_u|: unseen items outside the action set."),
                _c(
                    "discovery_base",
                    F,
                    "share",
                    "Share of targets with baseline ρ > 1/|T_u| (at the model's predictions).",
                ),
                _c("discovery_max", F, "share", "Share of targets with ρ* > 1/|T_u| (best ratings of the action set)."),
                _c("mean_lift", F, "ratio", "Mean over targets of ρ*/ρ."),
                _c("mean_gain", F, "probability", "Mean over targets of ρ* − ρ."),
                _c("top1_reachable_share", F, "share", "Share of targets the user can put on top (β → ∞, exact)."),
                _c("beta", F, "1/rating", "Softmax inverse temperature β (config `reach.beta`)."),
                _c("budget", I, "items", "K: size of the action set (config `reach.budget`)."),
                _REASON,
            ),
            "reach_user",
        ),
        Table(
            "reach_item",
            "Per item of a model snapshot: how available it is to the users it is a target for.",
            "seed 003 Def. 1 (reachability); DESIGN §4.8",
            ("ds", "item_id"),
            (
                _DS,
                _c("item_id", S, "-", "Item of the snapshot."),
                _c(
                    "attributes",
                    S,
                    "JSON",
                    "The item's attributes {attribute: group} (config `reach.item_attributes`).",
                ),
                _c("n_users", I, "users", "Users for whom the item is a target."),
                _c("availability_base", F, "probability", "Mean baseline ρ over those users."),
                _c("availability_max", F, "probability", "Mean ρ* over those users (DESIGN §4.8 availability)."),
                _c(
                    "availability_uniform", F, "probability", "Mean 1/|T_u|: the availability of a uniform recommender."
                ),
                _c("unavailable", B, "-", "availability_max < availability_uniform: effectively unavailable."),
                _c("top1_reachable_share", F, "share", "Share of those users who can put the item on top."),
                _c("beta", F, "1/rating", "Softmax inverse temperature β (config `reach.beta`)."),
                _c("budget", I, "items", "K: size of the action set (config `reach.budget`)."),
                _REASON,
            ),
            "reach_item",
        ),
        Table(
            "reach_group",
            "Reachability and stability by item or user attribute: group means with CIs and gaps to the rest.",
            "seed 003; DESIGN §3, §4.8 (percentile bootstrap over items or users, SciPy)",
            ("ds", "side", "attribute", "group", "metric"),
            (
                _DS,
                _c(
                    "side",
                    S,
                    "-",
                    "`item` (units: items of reach_item) or `user` (users of reach_user/stability_user).",
                ),
                _ATTR,
                _GROUP,
                _c("metric", S, "-", "Column of reach_item / reach_user, or `stability_lb_B<B>` / `noise_floor`."),
                _c("n", I, "units", "Items or users of the group with a defined value."),
                _c("mean", F, "as the metric", "Mean of the metric over the group's units."),
                _c("median", F, "as the metric", "Median over the group's units."),
                _CI_LOW,
                _CI_HIGH,
                _c("diff_vs_rest", F, "as the metric", "Group mean − mean of the other units."),
                _c("diff_ci_low", F, "as the metric", "Lower bound of the two-sample bootstrap CI of diff_vs_rest."),
                _c("diff_ci_high", F, "as the metric", "Upper bound of the two-sample bootstrap CI of diff_vs_rest."),
                _LEVEL,
                _REASON,
            ),
            "reach_group",
        ),
        Table(
            "stability_user",
            "Per user and budget B: the largest change of the user's recommendations when B other users' data change.",
            "seed 003 Def. 1 (stability); DESIGN §4.8",
            ("ds", "user_id", "B"),
            (
                _DS,
                _c("user_id", S, "-", "User of the snapshot."),
                _c("B", I, "users", "Other users whose ratings were replaced (config `reach.stability_budgets`)."),
                _c("n_perturbations", I, "retrainings", "Perturbations that left this user's own data unchanged."),
                _c(
                    "stability_lb",
                    F,
                    "total variation",
                    "Largest TV change seen: a lower bound of the stability metric.",
                ),
                _c(
                    "noise_floor",
                    F,
                    "total variation",
                    "Largest TV change from retraining the same data with other seeds.",
                ),
                _c("noise_seeds", I, "retrainings", "Seeds behind noise_floor (config `reach.noise_seeds`)."),
                _c("above_noise", B, "-", "stability_lb > noise_floor: the change is more than training noise."),
                _REASON,
            ),
            "stability_user",
        ),
        Table(
            "dq_results",
            "Data-quality results of the day: one row per suite and subject (file or table).",
            "DESIGN §3; expectations/README.md",
            ("ds", "table", "suite", "subject"),
            (
                _DS,
                _c("table", S, "-", "Input or output table the suite validates."),
                _c("suite", S, "-", "Expectation suite (expectations/<suite>.json)."),
                _c("subject", S, "-", "What was validated: a file path or a table name."),
                _c("success", B, "-", "No critical expectation failed."),
                _c("n_expectations", I, "expectations", "Expectations evaluated."),
                _c("n_failed", I, "expectations", "Expectations that failed, critical or warning."),
                _c("n_warnings", I, "expectations", "Failed expectations of severity warning."),
                _c("failed_critical", S, "-", "Names of the failed critical expectations, comma-separated."),
                _c("failed_warning", S, "-", "Names of the failed warnings, comma-separated."),
                _c("details", S, "JSON", "Each failure with its unexpected count, sample values and file rows."),
            ),
            "dq_results",
            published_view=False,
        ),
    )
}


def table(name: str) -> Table:
    """The registry entry of ``name``. Raises KeyError naming the known tables."""
    try:
        return TABLES[name]
    except KeyError:
        raise KeyError(f"no output table {name!r}; known: {', '.join(TABLES)}") from None


def polars_schema(name: str) -> dict[str, pl.DataType]:
    """{column: dtype} of the rows the estimators produce for table ``name``
    (without ``run_id``). Raises KeyError for an unknown table."""
    return table(name).schema


#: Tables with a ``<table>_published`` view (days whose data-quality results all passed).
GATED_TABLES: tuple[str, ...] = tuple(n for n, t in TABLES.items() if t.published_view)

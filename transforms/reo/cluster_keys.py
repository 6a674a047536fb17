"""How the count stage keys cluster ids, and the columns that tell a reader
how a table's variance treated clusters (DESIGN §4.1 "Clustered rows").

sql/impressions_bucket.sql gives every cluster id a key: a file of at most
``exact`` ids keeps one key per id (negative, ``-1 - h % span``), a file of
more hashes its ids into ``buckets`` buckets (``h % buckets``); a day keeps
per-cluster keys when all its keyed rows have them and number at most
``exact`` (sql/count_random_shares.sql). Per-cluster keys give the exact
per-cluster sandwich of :mod:`fairmon.transforms.reo.cluster`; buckets are
its documented fallback, which bounds the rows a day's count returns.
"""

from __future__ import annotations

from fairmon.transforms.registry import Column, F, I, S, non_negative, positive

#: Columns of the REO family's tables that say how the variance treated clusters.
CLUSTER_BY = Column(
    "cluster_by",
    S,
    "-",
    "Rows sharing this id are one cluster in the interval (`request_id`, `user_id`); `none`: independent rows "
    "(config `estimation.cluster_by`).",
)
DESIGN_EFFECT = Column(
    "design_effect",
    F,
    "ratio",
    "Cluster-robust ÷ multinomial variance of the estimate (delta method); 1 for independent rows.",
    bounds=positive("design_effect_positive"),
)

N_CLUSTERS = Column(
    "n_clusters",
    I,
    "clusters",
    "Units of the cluster-robust variance: the day's distinct cluster ids (default and random traffic, a "
    "cluster in both counted once) when they number at most `estimation.cluster_exact_max`, else the non-empty "
    "hash buckets of whole clusters; the variance has n_clusters − 1 degrees of freedom. Null for independent rows.",
    bounds=non_negative("n_clusters_non_negative"),
)
CLUSTER_SUMS = Column(
    "cluster_sums",
    S,
    "-",
    "`exact`: per-cluster sums (few clusters); `hashed`: sums per hash bucket of cluster ids; `none`: "
    "independent rows.",
)


def cluster_key_params(buckets: int, exact: int) -> dict[str, int]:
    """The bound parameters of sql/impressions_bucket.sql and
    sql/count_random_shares.sql: ``buckets`` hash buckets (G, ``[estimation]
    cluster_buckets``), ``span`` = G·⌊(2³¹ − 1)/G⌋, the range of per-cluster
    keys, and ``exact`` (``[estimation] cluster_exact_max``), the most
    clusters a file or a day sums one by one. Keys are stored as 32-bit
    integers, and G divides the span, so a per-cluster key still gives its
    id's bucket. Raises ValueError for G < 2 or ``exact`` < 0."""
    if buckets < 2:
        raise ValueError(f"cluster_buckets must be at least 2, got {buckets}")
    if exact < 0:
        raise ValueError(f"cluster_exact_max must be at least 0, got {exact}")
    return {"buckets": buckets, "span": buckets * ((2**31 - 1) // buckets), "exact": exact}

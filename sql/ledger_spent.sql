-- ε already spent by the individuals of a release (`release_members`, item_id); DESIGN §4.6, basic
-- composition per individual: a ledger row keyed 'population:…' counts for each individual listed
-- under that key in privacy_ledger_members, and `spent` is the most any one of this release's
-- individuals has spent (whichever model or file the earlier releases came from). Rows with any
-- other key (the `path#model` keys written before population keys) cannot be matched to
-- individuals: they count in full against every release (`legacy`, `legacy_rows`).
WITH pop AS (
    SELECT dataset, sum(epsilon) AS eps FROM privacy_ledger WHERE dataset LIKE 'population:%' GROUP BY dataset
),
per_item AS (
    SELECT m.item_id, sum(p.eps) AS eps
    FROM privacy_ledger_members AS m JOIN pop AS p ON p.dataset = m.population
    WHERE m.item_id IN (SELECT CAST(item_id AS VARCHAR) FROM release_members)
    GROUP BY m.item_id
),
legacy AS (
    SELECT coalesce(sum(epsilon), 0.0) AS eps, count(*) AS n FROM privacy_ledger WHERE dataset NOT LIKE 'population:%'
)
SELECT (coalesce((SELECT max(eps) FROM per_item), 0.0) + legacy.eps)::DOUBLE AS spent,
       legacy.eps::DOUBLE AS legacy,
       legacy.n::BIGINT AS legacy_rows
FROM legacy

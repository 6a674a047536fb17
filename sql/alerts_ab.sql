-- The evidence of the ab_change alerts (DESIGN §4.9): A/B differences of REO of every published day.
SELECT ds, attribute, control, treatment, metric, method, diff, se, p_value, df, ci_low, ci_high
FROM reo_ab_published
WHERE metric = 'reo'
ORDER BY ds, attribute, control, treatment

-- Total ε already released from $dataset.
SELECT coalesce(sum(epsilon), 0.0)::DOUBLE AS spent FROM privacy_ledger WHERE dataset = $dataset

-- Remove one ingest unit before it is re-inserted, so re-ingesting replaces it.
-- A unit is a day (ds_start = ds) or a pooled random range (ds_start..ds);
-- $scope picks which traffic it owns: 'all', 'random' or 'nonrandom'.
DELETE FROM impressions
WHERE ds_start = $ds_start AND ds = $ds
  AND ($scope = 'all'
       OR ($scope = 'random' AND traffic = 'random')
       OR ($scope = 'nonrandom' AND traffic <> 'random'))

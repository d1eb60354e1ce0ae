-- The intervals of a finer scale summed into intervals ${factor} times
-- longer.
SELECT CAST(floor(i / ${factor}) AS BIGINT) AS i,
       sum(frames) AS frames,
       sum(bytes) AS bytes
FROM ${intervals}
GROUP BY CAST(floor(i / ${factor}) AS BIGINT)

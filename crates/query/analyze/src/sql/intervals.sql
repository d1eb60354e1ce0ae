-- Frames and bytes in each non-empty interval of ${scale_ns} ns from
-- ${origin_ns}.
SELECT CAST(floor((ts_ns - ${origin_ns}) / ${scale_ns}) AS BIGINT) AS i,
       count(*) AS frames,
       sum(wire_len) AS bytes
FROM packets
GROUP BY CAST(floor((ts_ns - ${origin_ns}) / ${scale_ns}) AS BIGINT)

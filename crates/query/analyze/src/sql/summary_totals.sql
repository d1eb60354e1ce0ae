-- Totals of the packets table.
SELECT count(*) AS frames,
       sum(wire_len) AS bytes,
       sum(cap_len) AS captured_bytes,
       min(ts_ns) AS first_ns,
       max(ts_ns) AS last_ns,
       sum(CASE WHEN parse_error IS NULL THEN 0 ELSE 1 END) AS parse_errors
FROM packets

-- Host pairs (either direction) by traffic between them.
WITH p AS (
  SELECT CASE WHEN ip_src <= ip_dst THEN ip_src ELSE ip_dst END AS a,
         CASE WHEN ip_src <= ip_dst THEN ip_dst ELSE ip_src END AS b,
         CASE WHEN ip_src <= ip_dst THEN wire_len ELSE 0 END AS a_to_b,
         CASE WHEN ip_src <= ip_dst THEN 0 ELSE wire_len END AS b_to_a
  FROM packets WHERE ip_version IS NOT NULL
)
SELECT ip_text(a) AS host_a, ip_text(b) AS host_b,
       count(*) AS frames,
       sum(a_to_b) + sum(b_to_a) AS bytes,
       sum(a_to_b) AS bytes_a_to_b,
       sum(b_to_a) AS bytes_b_to_a
FROM p
GROUP BY a, b
ORDER BY ${by} DESC, host_a, host_b
LIMIT ${limit}

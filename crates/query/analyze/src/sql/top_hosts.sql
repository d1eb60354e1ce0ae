-- Hosts by traffic sent plus received.
WITH h AS (
  SELECT ip_src AS host, count(*) AS frames_sent, sum(wire_len) AS bytes_sent,
         0 AS frames_received, 0 AS bytes_received
  FROM packets WHERE ip_version IS NOT NULL GROUP BY ip_src
  UNION ALL
  SELECT ip_dst AS host, 0, 0, count(*), sum(wire_len)
  FROM packets WHERE ip_version IS NOT NULL GROUP BY ip_dst
)
SELECT ip_text(host) AS host,
       sum(frames_sent) + sum(frames_received) AS frames,
       sum(bytes_sent) + sum(bytes_received) AS bytes,
       sum(frames_sent) AS frames_sent, sum(bytes_sent) AS bytes_sent,
       sum(frames_received) AS frames_received, sum(bytes_received) AS bytes_received
FROM h
GROUP BY host
ORDER BY ${by} DESC, host
LIMIT ${limit}

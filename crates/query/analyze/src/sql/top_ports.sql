-- Transport ports by traffic from or to them.
WITH t AS (
  SELECT ip_proto AS proto, src_port AS port, count(*) AS frames, sum(wire_len) AS bytes
  FROM packets WHERE src_port IS NOT NULL GROUP BY ip_proto, src_port
  UNION ALL
  SELECT ip_proto AS proto, dst_port AS port, count(*) AS frames, sum(wire_len) AS bytes
  FROM packets WHERE dst_port IS NOT NULL GROUP BY ip_proto, dst_port
)
SELECT CASE proto WHEN 6 THEN 'tcp' WHEN 17 THEN 'udp' WHEN 132 THEN 'sctp'
                  ELSE CAST(proto AS STRING) END AS proto,
       port,
       sum(frames) AS frames,
       sum(bytes) AS bytes
FROM t
GROUP BY proto, port
ORDER BY ${by} DESC, proto, port
LIMIT ${limit}

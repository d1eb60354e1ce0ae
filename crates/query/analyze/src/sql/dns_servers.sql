-- Per DNS server: queries, how many went unanswered, and the response
-- time's quantiles (interpolated between neighbours) over those answered.
SELECT ip_text(server) AS server,
       server_port,
       count(*) AS queries,
       sum(CASE WHEN status = 'unanswered' THEN 1 ELSE 0 END) AS unanswered,
       CAST(round(percentile_cont(0.5) WITHIN GROUP (ORDER BY CAST(latency_ns AS DOUBLE))) AS BIGINT) AS p50_latency_ns,
       CAST(round(percentile_cont(0.9) WITHIN GROUP (ORDER BY CAST(latency_ns AS DOUBLE))) AS BIGINT) AS p90_latency_ns,
       CAST(round(percentile_cont(0.99) WITHIN GROUP (ORDER BY CAST(latency_ns AS DOUBLE))) AS BIGINT) AS p99_latency_ns,
       max(latency_ns) AS max_latency_ns
FROM dns
WHERE status <> 'response_only'
GROUP BY server, server_port
ORDER BY queries DESC, server
LIMIT ${limit}

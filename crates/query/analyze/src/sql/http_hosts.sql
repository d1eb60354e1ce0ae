-- The HTTP hosts asked for: requests, how they were answered, and the
-- response time's quantiles (response head after request head).
SELECT host,
       count(*) AS requests,
       sum(CASE WHEN status >= 200 AND status < 300 THEN 1 ELSE 0 END) AS ok_2xx,
       sum(CASE WHEN status >= 300 AND status < 400 THEN 1 ELSE 0 END) AS redirect_3xx,
       sum(CASE WHEN status >= 400 AND status < 500 THEN 1 ELSE 0 END) AS client_error_4xx,
       sum(CASE WHEN status >= 500 THEN 1 ELSE 0 END) AS server_error_5xx,
       sum(CASE WHEN status IS NULL THEN 1 ELSE 0 END) AS unanswered,
       CAST(round(percentile_cont(0.5) WITHIN GROUP (ORDER BY CAST(latency_ns AS DOUBLE))) AS BIGINT) AS p50_latency_ns,
       CAST(round(percentile_cont(0.9) WITHIN GROUP (ORDER BY CAST(latency_ns AS DOUBLE))) AS BIGINT) AS p90_latency_ns,
       CAST(round(percentile_cont(0.99) WITHIN GROUP (ORDER BY CAST(latency_ns AS DOUBLE))) AS BIGINT) AS p99_latency_ns
FROM http
GROUP BY host
ORDER BY requests DESC, host
LIMIT ${limit}

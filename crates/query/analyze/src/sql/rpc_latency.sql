-- Server response time (reply time - call time) per server and procedure:
-- exact quantiles (interpolated between neighbours) and the mean.
SELECT ip_text(server) AS server,
       coalesce(program_name, CAST(program AS STRING)) AS program,
       version,
       coalesce(procedure_name, CAST(procedure AS STRING)) AS procedure,
       count(*) AS calls,
       CAST(avg(latency_ns) AS BIGINT) AS mean_latency_ns,
       CAST(round(percentile_cont(0.5) WITHIN GROUP (ORDER BY CAST(latency_ns AS DOUBLE))) AS BIGINT) AS p50_latency_ns,
       CAST(round(percentile_cont(0.9) WITHIN GROUP (ORDER BY CAST(latency_ns AS DOUBLE))) AS BIGINT) AS p90_latency_ns,
       CAST(round(percentile_cont(0.99) WITHIN GROUP (ORDER BY CAST(latency_ns AS DOUBLE))) AS BIGINT) AS p99_latency_ns,
       max(latency_ns) AS max_latency_ns
FROM rpc
WHERE latency_ns IS NOT NULL
GROUP BY server, program_name, program, version, procedure_name, procedure
ORDER BY server, calls DESC, program, version, procedure

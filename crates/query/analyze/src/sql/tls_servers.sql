-- The servers TLS clients asked for (SNI): handshakes, the versions the
-- servers chose (772 TLS 1.3, 771 TLS 1.2), clients, and the handshake
-- time's quantiles (ServerHello after ClientHello).
SELECT sni,
       count(*) AS handshakes,
       sum(CASE WHEN version = 772 THEN 1 ELSE 0 END) AS tls13,
       sum(CASE WHEN version = 771 THEN 1 ELSE 0 END) AS tls12,
       sum(CASE WHEN version IS NULL THEN 1 ELSE 0 END) AS no_server_hello,
       count(DISTINCT client) AS clients,
       CAST(round(percentile_cont(0.5) WITHIN GROUP (ORDER BY CAST(latency_ns AS DOUBLE))) AS BIGINT) AS p50_latency_ns,
       CAST(round(percentile_cont(0.9) WITHIN GROUP (ORDER BY CAST(latency_ns AS DOUBLE))) AS BIGINT) AS p90_latency_ns
FROM tls
GROUP BY sni
ORDER BY handshakes DESC, sni
LIMIT ${limit}

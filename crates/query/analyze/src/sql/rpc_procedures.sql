-- RPC calls per program, version and procedure: how many, how fast they
-- came (mean over the span of the rpc table, and the busiest second), how
-- they ended, and the bytes each way.
WITH labelled AS (
  SELECT coalesce(program_name, CAST(program AS STRING), 'unknown') AS program,
         coalesce(version, 0) AS version,
         coalesce(procedure_name, CAST(procedure AS STRING), 'unknown') AS procedure,
         ts_ns, call_ts, reply_ts, status, retransmits, call_bytes, reply_bytes
  FROM rpc
),
span AS (
  SELECT greatest(CAST(max(ts_ns) - min(ts_ns) AS DOUBLE) / 1e9, 1.0) AS seconds FROM rpc
),
per_second AS (
  SELECT program, version, procedure, count(*) AS n
  FROM labelled
  -- The second, by integer arithmetic alone: a division is integer in
  -- DataFusion but floating point in Spark.
  GROUP BY program, version, procedure, ts_ns - ts_ns % 1000000000
),
peak AS (
  SELECT program, version, procedure, max(n) AS peak_ops_per_s
  FROM per_second GROUP BY program, version, procedure
),
totals AS (
  SELECT program, version, procedure,
         count(*) AS calls,
         sum(CASE WHEN call_ts IS NOT NULL AND reply_ts IS NULL THEN 1 ELSE 0 END) AS no_reply,
         sum(CASE WHEN call_ts IS NULL THEN 1 ELSE 0 END) AS no_call,
         sum(CASE WHEN retransmits > 0 THEN 1 ELSE 0 END) AS retransmitted,
         sum(CASE WHEN status <> 0 THEN 1 ELSE 0 END) AS errors,
         sum(call_bytes) AS call_bytes,
         sum(reply_bytes) AS reply_bytes
  FROM labelled
  GROUP BY program, version, procedure
)
SELECT t.program, t.version, t.procedure, t.calls,
       CAST(t.calls AS DOUBLE) / s.seconds AS ops_per_s,
       p.peak_ops_per_s,
       t.no_reply, t.no_call, t.retransmitted, t.errors, t.call_bytes, t.reply_bytes
FROM totals t
JOIN peak p ON t.program = p.program AND t.version = p.version AND t.procedure = p.procedure
CROSS JOIN span s
ORDER BY t.calls DESC, t.program, t.version, t.procedure

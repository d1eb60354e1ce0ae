-- NFS calls per client, and what the replies say was read (READ's count)
-- and written (WRITE's count). Only READ and WRITE detail rows meet the
-- rpc table in the join, so it stays small however many calls there are.
WITH io AS (
  SELECT r.client,
         sum(CASE WHEN n.op_name = 'READ' THEN n.res_count ELSE 0 END) AS bytes_read,
         sum(CASE WHEN n.op_name = 'WRITE' THEN n.res_count ELSE 0 END) AS bytes_written,
         sum(CASE WHEN n.op_name = 'READ' THEN 1 ELSE 0 END) AS reads,
         sum(CASE WHEN n.op_name = 'WRITE' THEN 1 ELSE 0 END) AS writes
  FROM nfs n JOIN rpc r ON r.id = n.rpc_id
  WHERE n.program = 100003 AND n.op_name IN ('READ', 'WRITE')
  GROUP BY r.client
),
calls AS (
  SELECT client, count(*) AS calls FROM rpc WHERE program = 100003 GROUP BY client
)
SELECT ip_text(c.client) AS client,
       c.calls,
       coalesce(io.bytes_read, 0) AS bytes_read,
       coalesce(io.bytes_written, 0) AS bytes_written,
       coalesce(io.reads, 0) AS reads,
       coalesce(io.writes, 0) AS writes
FROM calls c LEFT JOIN io ON io.client = c.client
ORDER BY bytes_read + bytes_written DESC, client

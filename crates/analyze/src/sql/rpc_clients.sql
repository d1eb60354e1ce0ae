-- NFS bytes read and written per client: what the replies say was read
-- (READ's count) and written (WRITE's count), with the calls behind them.
SELECT ip_text(r.client) AS client,
       count(DISTINCT r.id) AS calls,
       sum(CASE WHEN n.op_name = 'READ' THEN n.res_count ELSE 0 END) AS bytes_read,
       sum(CASE WHEN n.op_name = 'WRITE' THEN n.res_count ELSE 0 END) AS bytes_written,
       sum(CASE WHEN n.op_name = 'READ' THEN 1 ELSE 0 END) AS reads,
       sum(CASE WHEN n.op_name = 'WRITE' THEN 1 ELSE 0 END) AS writes
FROM rpc r JOIN nfs n ON n.rpc_id = r.id
WHERE n.program = 100003
GROUP BY r.client
ORDER BY bytes_read + bytes_written DESC, client

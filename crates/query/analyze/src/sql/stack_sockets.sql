-- Per socket (its cookie; the 4-tuple it had, which the kernel fills in as
-- the socket is bound and connected and clears as it closes): who used it,
-- what the application wrote and read, what crossed the device each way
-- (transport payload; retransmissions included), what was retransmitted,
-- and the TCP state seen on incoming segments (tcp_probe).
SELECT cookie,
       netns,
       max(comm) AS comm,
       max(pid) AS pid,
       ip_text(max(local_addr)) AS local_ip,
       max(local_port) AS local_port,
       ip_text(max(remote_addr)) AS remote_ip,
       max(remote_port) AS remote_port,
       max(proto) AS proto,
       min(ts_ns) AS first_ns,
       max(ts_ns) AS last_ns,
       sum(CASE WHEN event = 'send' THEN bytes ELSE 0 END) AS app_sent,
       sum(CASE WHEN event = 'recv' THEN bytes ELSE 0 END) AS app_received,
       sum(CASE WHEN event = 'dev_xmit' THEN payload ELSE 0 END) AS dev_sent,
       sum(CASE WHEN event = 'dev_recv' THEN payload ELSE 0 END) AS dev_received,
       sum(CASE WHEN event = 'dev_xmit' THEN 1 ELSE 0 END) AS dev_frames_sent,
       sum(CASE WHEN event = 'dev_recv' THEN 1 ELSE 0 END) AS dev_frames_received,
       sum(CASE WHEN event = 'retransmit' THEN 1 ELSE 0 END) AS retransmits,
       sum(CASE WHEN event = 'retransmit' THEN bytes ELSE 0 END) AS retransmitted,
       sum(CASE WHEN event = 'tcp_probe' THEN 1 ELSE 0 END) AS probes,
       max(CASE WHEN event = 'tcp_probe' THEN snd_cwnd END) AS max_cwnd,
       avg(CASE WHEN event = 'tcp_probe' AND srtt_us > 0 THEN srtt_us END) AS mean_srtt_us,
       max(CASE WHEN event = 'tcp_probe' THEN srtt_us END) AS max_srtt_us,
       max(total_retrans) AS total_retrans
FROM stack
WHERE cookie IS NOT NULL
GROUP BY cookie, netns
ORDER BY app_sent + app_received + dev_sent + dev_received DESC, first_ns, cookie

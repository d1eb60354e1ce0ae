-- stack_sockets.sql's table from the per-socket intervals
-- (stack_intervals): the same columns, summed over a socket's intervals
-- (null where the level recorded leaves them empty: the walk level has no
-- device columns).
-- probes counts the incoming segments TCP processed; mean_srtt_us weighs
-- each interval's mean by its samples; total_retrans is the
-- retransmissions seen while recording.
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
       max(ts_ns + CAST(interval_ns AS BIGINT)) AS last_ns,
       sum(app_sent) AS app_sent,
       sum(app_received) AS app_received,
       sum(dev_sent) AS dev_sent,
       sum(dev_received) AS dev_received,
       sum(dev_frames_sent) AS dev_frames_sent,
       sum(dev_frames_received) AS dev_frames_received,
       sum(retransmits) AS retransmits,
       sum(retransmitted) AS retransmitted,
       sum(segs_in) AS probes,
       max(cwnd_max) AS max_cwnd,
       sum(CASE WHEN srtt_us_mean > 0 THEN srtt_us_mean * tcp_samples END)
           / sum(CASE WHEN srtt_us_mean > 0 THEN tcp_samples END) AS mean_srtt_us,
       max(srtt_us_max) AS max_srtt_us,
       sum(retransmits) AS total_retrans
FROM stack_intervals
GROUP BY cookie, netns
ORDER BY coalesce(app_sent, 0) + coalesce(app_received, 0) + coalesce(dev_sent, 0)
             + coalesce(dev_received, 0) DESC, first_ns, cookie

-- Per second: what the kernel saw, what was captured, and what each stage
-- dropped (all workers and interfaces together).
SELECT ts_ns AS start_ns,
       sum(kernel_packets) AS kernel_seen,
       sum(frames) AS captured,
       sum(kernel_drops) AS kernel_drops,
       sum(kernel_freezes) AS queue_freezes,
       sum(pcap_frames) AS pcap_frames,
       sum(pcap_drops) AS pcap_drops,
       sum(records) AS records,
       max(ring_backlog) AS max_ring_backlog,
       max(pcap_backlog) AS max_pcap_backlog
FROM stats
GROUP BY ts_ns
ORDER BY ts_ns

-- Per second: what the kernel saw, what was captured, and what each stage
-- dropped (all workers and interfaces together); what the pcap writers
-- took in and put on disk, and the fastest compression level any of them
-- was using (0 = stored, 100 = LZ4, NULL = not compressing).
SELECT ts_ns AS start_ns,
       sum(kernel_packets) AS kernel_seen,
       sum(frames) AS captured,
       sum(kernel_drops) AS kernel_drops,
       sum(kernel_freezes) AS queue_freezes,
       sum(pcap_frames) AS pcap_frames,
       sum(pcap_drops) AS pcap_drops,
       sum(records) AS records,
       max(ring_backlog) AS max_ring_backlog,
       max(pcap_backlog) AS max_pcap_backlog,
       sum(pcap_bytes) AS pcap_bytes,
       sum(pcap_stored_bytes) AS pcap_stored_bytes,
       min(pcap_level) AS pcap_level
FROM stats
WHERE stack_event IS NULL
GROUP BY ts_ns
ORDER BY ts_ns

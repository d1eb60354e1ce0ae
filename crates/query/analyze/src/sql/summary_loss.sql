-- Loss totals by stage from the per-second stats (live captures; the
-- rows of weir stack, which carry stack_event, count events, not frames).
SELECT count(DISTINCT ts_ns) AS seconds,
       sum(kernel_packets) AS kernel_seen,
       sum(frames) AS captured,
       sum(kernel_drops) AS kernel_drops,
       sum(kernel_freezes) AS queue_freezes,
       sum(pcap_frames) AS pcap_frames,
       sum(pcap_drops) AS pcap_drops,
       sum(records) AS records
FROM stats
WHERE stack_event IS NULL

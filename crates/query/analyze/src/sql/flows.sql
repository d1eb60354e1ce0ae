-- Bidirectional flows: one row per (address, port) pair and protocol,
-- oriented by its first packet (its sender is src). Portable SQL: runs
-- unchanged on DataFusion and Spark SQL over the table `packets`.
WITH p AS (
  SELECT ts_ns, wire_len, ip_proto AS proto, tcp_flags, tcp_seq, payload_len,
         ip_src, ip_dst,
         COALESCE(src_port, 0) AS sp,
         COALESCE(dst_port, 0) AS dp,
         (ip_src < ip_dst OR (ip_src = ip_dst AND COALESCE(src_port, 0) <= COALESCE(dst_port, 0))) AS from_a
  FROM packets
  WHERE ip_version IS NOT NULL
),
k AS (
  SELECT CASE WHEN from_a THEN ip_src ELSE ip_dst END AS a_ip,
         CASE WHEN from_a THEN sp ELSE dp END AS a_port,
         CASE WHEN from_a THEN ip_dst ELSE ip_src END AS b_ip,
         CASE WHEN from_a THEN dp ELSE sp END AS b_port,
         proto, from_a, ts_ns, wire_len, tcp_flags, tcp_seq, payload_len
  FROM p
),
d AS (
  SELECT a_ip, a_port, b_ip, b_port, proto, from_a,
         min(ts_ns) AS first_ns,
         max(ts_ns) AS last_ns,
         count(*) AS frames,
         sum(wire_len) AS bytes,
         sum(COALESCE(payload_len, 0)) AS payload,
         bit_or(tcp_flags) AS flags,
         -- SYN alone, SYN+ACK, and ACK without SYN (18 = SYN|ACK)
         min(CASE WHEN tcp_flags & 18 = 2 THEN ts_ns END) AS syn_ns,
         min(CASE WHEN tcp_flags & 18 = 18 THEN ts_ns END) AS synack_ns,
         min(CASE WHEN tcp_flags & 18 = 16 THEN ts_ns END) AS ack_ns,
         -- A data segment whose sequence number was already sent is a
         -- retransmission: data segments less distinct sequence numbers.
         -- (One aggregation: a GROUP BY per segment and a join back cost
         -- ten times as much.)
         sum(CASE WHEN proto = 6 AND payload_len > 0 THEN 1 ELSE 0 END)
           - count(DISTINCT CASE WHEN proto = 6 AND payload_len > 0 THEN tcp_seq END) AS retrans
  FROM k
  GROUP BY a_ip, a_port, b_ip, b_port, proto, from_a
),
f AS (
  SELECT a_ip, a_port, b_ip, b_port, proto,
         min(first_ns) AS first_ns,
         max(last_ns) AS last_ns,
         min(CASE WHEN from_a THEN first_ns END) AS a_first,
         min(CASE WHEN NOT from_a THEN first_ns END) AS b_first,
         sum(CASE WHEN from_a THEN frames ELSE 0 END) AS a_frames,
         sum(CASE WHEN from_a THEN 0 ELSE frames END) AS b_frames,
         sum(CASE WHEN from_a THEN bytes ELSE 0 END) AS a_bytes,
         sum(CASE WHEN from_a THEN 0 ELSE bytes END) AS b_bytes,
         sum(CASE WHEN from_a THEN payload ELSE 0 END) AS a_payload,
         sum(CASE WHEN from_a THEN 0 ELSE payload END) AS b_payload,
         max(CASE WHEN from_a THEN flags END) AS a_flags,
         max(CASE WHEN from_a THEN NULL ELSE flags END) AS b_flags,
         sum(CASE WHEN from_a THEN retrans ELSE 0 END) AS a_retrans,
         sum(CASE WHEN from_a THEN 0 ELSE retrans END) AS b_retrans,
         min(CASE WHEN from_a THEN syn_ns END) AS a_syn,
         min(CASE WHEN from_a THEN NULL ELSE syn_ns END) AS b_syn,
         min(CASE WHEN from_a THEN synack_ns END) AS a_synack,
         min(CASE WHEN from_a THEN NULL ELSE synack_ns END) AS b_synack,
         min(CASE WHEN from_a THEN ack_ns END) AS a_ack,
         min(CASE WHEN from_a THEN NULL ELSE ack_ns END) AS b_ack
  FROM d
  GROUP BY a_ip, a_port, b_ip, b_port, proto
),
o AS (
  SELECT f.*, (b_first IS NULL OR a_first <= b_first) AS a_starts FROM f
),
oriented AS (
  SELECT
    CASE WHEN a_starts THEN a_ip ELSE b_ip END AS src_ip,
    CASE WHEN a_starts THEN a_port ELSE b_port END AS src_port,
    CASE WHEN a_starts THEN b_ip ELSE a_ip END AS dst_ip,
    CASE WHEN a_starts THEN b_port ELSE a_port END AS dst_port,
    proto,
    first_ns,
    last_ns,
    last_ns - first_ns AS duration_ns,
    CASE WHEN a_starts THEN a_frames ELSE b_frames END AS fwd_frames,
    CASE WHEN a_starts THEN a_bytes ELSE b_bytes END AS fwd_bytes,
    CASE WHEN a_starts THEN b_frames ELSE a_frames END AS rev_frames,
    CASE WHEN a_starts THEN b_bytes ELSE a_bytes END AS rev_bytes,
    CASE WHEN a_starts THEN a_payload ELSE b_payload END AS fwd_payload,
    CASE WHEN a_starts THEN b_payload ELSE a_payload END AS rev_payload,
    CASE WHEN a_starts THEN a_flags ELSE b_flags END AS fwd_tcp_flags,
    CASE WHEN a_starts THEN b_flags ELSE a_flags END AS rev_tcp_flags,
    CASE WHEN a_starts THEN a_retrans ELSE b_retrans END AS fwd_retrans,
    CASE WHEN a_starts THEN b_retrans ELSE a_retrans END AS rev_retrans,
    CASE WHEN a_starts THEN a_syn ELSE b_syn END AS syn_ns,
    CASE WHEN a_starts THEN b_synack ELSE a_synack END AS synack_ns,
    CASE WHEN a_starts THEN a_ack ELSE b_ack END AS ack_ns
  FROM o
)
SELECT src_ip, src_port, dst_ip, dst_port, proto, first_ns, last_ns, duration_ns,
       fwd_frames, fwd_bytes, rev_frames, rev_bytes, fwd_payload, rev_payload,
       fwd_tcp_flags, rev_tcp_flags, fwd_retrans, rev_retrans,
       -- Handshake RTT: SYN to the ACK that completes it, seen in order.
       CASE WHEN syn_ns <= synack_ns AND synack_ns <= ack_ns THEN ack_ns - syn_ns END AS handshake_rtt_ns,
       CASE WHEN syn_ns <= synack_ns AND synack_ns <= ack_ns THEN synack_ns - syn_ns END AS server_rtt_ns,
       CASE WHEN syn_ns <= synack_ns AND synack_ns <= ack_ns THEN ack_ns - synack_ns END AS client_rtt_ns
FROM oriented

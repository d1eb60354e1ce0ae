-- Frames and bytes by protocol, largest first.
WITH p AS (
  SELECT CASE
           WHEN ip_version IS NULL THEN
             CASE ethertype
               WHEN 2054 THEN 'arp'
               WHEN 34525 THEN 'ipv6 (truncated)'
               WHEN 2048 THEN 'ipv4 (truncated)'
               WHEN 35020 THEN 'lldp'
               WHEN 34958 THEN 'eapol'
               ELSE 'other link'
             END
           WHEN ip_proto = 6 THEN 'tcp'
           WHEN ip_proto = 17 THEN 'udp'
           WHEN ip_proto = 1 THEN 'icmp'
           WHEN ip_proto = 58 THEN 'icmpv6'
           WHEN ip_proto = 132 THEN 'sctp'
           WHEN ip_proto = 2 THEN 'igmp'
           WHEN ip_proto = 47 THEN 'gre'
           WHEN ip_proto = 50 THEN 'esp'
           WHEN ip_proto = 89 THEN 'ospf'
           ELSE 'ip proto ' || CAST(ip_proto AS STRING)
         END AS protocol,
         ip_version, wire_len
  FROM packets
)
SELECT protocol,
       count(*) AS frames,
       sum(wire_len) AS bytes,
       sum(CASE WHEN ip_version = 4 THEN 1 ELSE 0 END) AS ipv4_frames,
       sum(CASE WHEN ip_version = 6 THEN 1 ELSE 0 END) AS ipv6_frames
FROM p
GROUP BY protocol
ORDER BY bytes DESC, protocol

-- Client fingerprints: JA4 (and JA3), with how many handshakes, clients
-- and server names each was seen with.
SELECT ja4,
       ja3,
       count(*) AS handshakes,
       count(DISTINCT client) AS clients,
       count(DISTINCT sni) AS server_names
FROM tls
GROUP BY ja4, ja3
ORDER BY handshakes DESC, ja4
LIMIT ${limit}

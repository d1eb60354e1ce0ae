-- The names most looked up: queries (and responses without their query),
-- how they were answered, and by how many clients.
SELECT qname,
       count(*) AS lookups,
       sum(CASE WHEN rcode = 0 THEN 1 ELSE 0 END) AS noerror,
       sum(CASE WHEN rcode = 3 THEN 1 ELSE 0 END) AS nxdomain,
       sum(CASE WHEN status = 'unanswered' THEN 1 ELSE 0 END) AS unanswered,
       count(DISTINCT client) AS clients
FROM dns
GROUP BY qname
ORDER BY lookups DESC, qname
LIMIT ${limit}

-- Responses by rcode (0 NOERROR, 2 SERVFAIL, 3 NXDOMAIN, 5 REFUSED, ...),
-- and the queries that got none.
SELECT CASE WHEN rcode IS NULL THEN 'none' ELSE CAST(rcode AS STRING) END AS response_code,
       count(*) AS messages
FROM dns
GROUP BY rcode
ORDER BY messages DESC, response_code

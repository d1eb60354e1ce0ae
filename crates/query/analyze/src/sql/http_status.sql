-- Responses by status code, with the methods of their requests.
SELECT CASE WHEN status IS NULL THEN 'none' ELSE CAST(status AS STRING) END AS status_code,
       method,
       count(*) AS requests
FROM http
GROUP BY status, method
ORDER BY requests DESC, status_code, method

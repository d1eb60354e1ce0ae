-- File handles by bytes read plus written (handles are hashed), with a
-- name the handle was looked up or created under, where one was seen.
WITH io AS (
  SELECT fh,
         sum(CASE WHEN op_name = 'READ' THEN res_count ELSE 0 END) AS bytes_read,
         sum(CASE WHEN op_name = 'WRITE' THEN res_count ELSE 0 END) AS bytes_written,
         count(*) AS ops
  FROM nfs
  WHERE program = 100003 AND fh IS NOT NULL AND op_name IN ('READ', 'WRITE')
  GROUP BY fh
),
-- NFSv3 returns the handle with the name (LOOKUP, CREATE); NFSv4 in the
-- GETFH that follows LOOKUP, OPEN or CREATE in the COMPOUND.
named AS (
  SELECT res_fh AS fh, name FROM nfs WHERE res_fh IS NOT NULL AND name IS NOT NULL
  UNION ALL
  SELECT g.res_fh AS fh, l.name
  FROM nfs l JOIN nfs g ON g.rpc_id = l.rpc_id AND g.op_index = l.op_index + 1
  WHERE l.version = 4 AND l.op_name IN ('LOOKUP', 'OPEN', 'CREATE') AND g.op_name = 'GETFH'
    AND g.res_fh IS NOT NULL AND l.name IS NOT NULL
),
names AS (SELECT fh, max(name) AS name FROM named GROUP BY fh)
SELECT io.fh, names.name, io.bytes_read, io.bytes_written, io.ops
FROM io LEFT JOIN names ON names.fh = io.fh
ORDER BY io.bytes_read + io.bytes_written DESC, fh
LIMIT ${limit}

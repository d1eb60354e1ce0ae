-- MAGNeT's "modulation": for every application write on a TCP socket, the
-- time until the device transmitted the segment carrying its last byte,
-- counted from the end of the write call (the kernel reports a write when
-- it returns): negative when the segment left while the call still ran,
-- positive when the data waited in the socket (window, cwnd, pacing).
-- A write ends at sequence number `seq` (write_seq after the call); a
-- transmitted segment ends at its `seq`; the write left with the first
-- segment (in time) whose end is at or past it. Ordered by sequence number
-- from the top, a running minimum over transmit times gives that segment
-- for every write in one pass; at equal sequence numbers the segment comes
-- first, so it counts.
SELECT cookie,
       ts_ns AS write_ns,
       bytes,
       wire_ns - ts_ns AS delay_ns
FROM (
    SELECT cookie, ts_ns, bytes, event,
           min(CASE WHEN event = 'dev_xmit' THEN ts_ns END) OVER (
               PARTITION BY cookie
               ORDER BY seq DESC, CASE WHEN event = 'dev_xmit' THEN 0 ELSE 1 END
               ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS wire_ns
    FROM stack
    WHERE proto = 6 AND cookie IS NOT NULL AND seq IS NOT NULL
      AND ((event = 'send' AND bytes > 0) OR (event = 'dev_xmit' AND payload > 0))
) AS marked
WHERE event = 'send' AND wire_ns IS NOT NULL
ORDER BY cookie, write_ns

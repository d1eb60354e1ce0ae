-- The write-to-wire delay histograms of the default mode's intervals, per
-- socket (merged in Rust): the kernel matched a sample of the writes to
-- the transmission of their last byte and counted each delay in a log2
-- bucket.
SELECT cookie, delay_writes, delay_sum_ns, app_sent, delay_hist
FROM stack_intervals
WHERE app_sent > 0 OR delay_writes > 0
ORDER BY cookie, ts_ns
